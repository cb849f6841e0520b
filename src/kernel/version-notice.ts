/**
 * Pure: what a deploy changed while a step waited (`versionChanged`), in words, for every approver
 * surface that speaks text: the MCP tools' summary and elicitation question, the chat agent's
 * interrupt, the CLI's confirmation prompt. The console draws the same facts as a field diff
 * (console/src/views/version-notice.ts). Nothing when the step runs under the version that
 * computed its preview.
 */
import type { PendingConfirmation } from "./pending.js";
import type { SkillVersion } from "./skill-version.js";

type Waiting = Pick<PendingConfirmation, "skillName" | "arguments" | "preview" | "versionChanged">;

/** `1.0.0`, or `1.0.0 (3f2a9c1e)` when two versions share a number but not a schema hash. */
const label = (v: SkillVersion, other: SkillVersion) =>
  v.version === other.version ? `${v.version} (${v.hash.slice(0, 8)})` : v.version;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** "label removed, name added": the top-level fields that differ, or "changed" for non-objects. */
export function fieldChanges(before: unknown, after: unknown): string {
  if (!isRecord(before) || !isRecord(after)) return "changed";
  const out: string[] = [];
  for (const k of Object.keys(before)) {
    if (!(k in after)) out.push(`${k} removed`);
    else if (JSON.stringify(before[k]) !== JSON.stringify(after[k])) out.push(`${k} changed`);
  }
  for (const k of Object.keys(after)) if (!(k in before)) out.push(`${k} added`);
  return out.length > 6 ? `${out.slice(0, 6).join(", ")}, …` : out.join(", ") || "changed";
}

/**
 * The notice, one line per fact; `show` renders a value on one line (each surface cuts it to its
 * own length and makes it safe for its medium).
 */
export function versionChangeLines(p: Waiting, show: (value: unknown) => string): string[] {
  const vc = p.versionChanged;
  if (!vc) return [];
  const lines = [
    `The skill changed while this step waited: ${p.skillName} ${label(vc.from, vc.to)} → ${label(vc.to, vc.from)}; approving runs the new version.`,
  ];
  if (vc.error) lines.push(`Approving would fail the step: ${vc.error.code}: ${vc.error.message}`);
  if (vc.arguments !== undefined)
    lines.push(
      `Arguments as the new version runs them (${fieldChanges(p.arguments, vc.arguments)}): ${show(vc.arguments)}`,
    );
  if (vc.preview !== undefined)
    lines.push(
      `Preview by the new version, unlike the one shown (${fieldChanges(p.preview, vc.preview)}): ${show(vc.preview)}`,
    );
  return lines;
}
