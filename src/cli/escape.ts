/**
 * The CLI is a terminal program: text from a run (goals, preview records, comments, error
 * messages, outputs) is data, never terminal control. A record title holding `ESC [2K` could
 * erase its own line in the confirmation preview, `ESC ] 52` write the operator's clipboard, a
 * newline or carriage return forge a line, a BIDI override reorder what is shown.
 *
 * - `esc(s)`: for run data put into a line: every control character (C0 with newline and tab,
 *   DEL, C1), BIDI controls and line/paragraph separators shown as `\n`, `\t`, `\u001b`, …
 * - `terminalLine(s)`: the last line of defence at the sink: the same, except the newlines and
 *   colour codes (SGR) the CLI itself writes.
 * `--json` output never goes through either: JSON.stringify already escapes C0, and it stays exact.
 */

// C0, DEL, C1, ALM, LRM/RLM, line and paragraph separators, LRE…RLO (embeddings and overrides), isolates
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
// eslint-disable-next-line no-control-regex
const UNSAFE_KEEPING_OURS =
  /\u001b\[[0-9;]*m|[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };
const shown = (c: string) => NAMED[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;

/** Run data, made inert for a terminal (one line, no control). */
export function esc(s: string): string {
  return s.replace(UNSAFE, shown);
}

/** A line (or lines) about to be written: only the CLI's own newlines and SGR colour codes pass. */
export function terminalLine(s: string): string {
  return s.replace(UNSAFE_KEEPING_OURS, (m) => (m.length > 1 ? m : shown(m)));
}
