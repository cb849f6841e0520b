/**
 * The confirmation prompt. On a terminal it takes single keys (y, n, … answer at once; Enter
 * leaves the step waiting; Ctrl-C and Ctrl-D too) in raw mode; elsewhere it reads a line. While it
 * asks, the run's events are followed, so a decision made elsewhere (the console, another
 * terminal, the API) ends the prompt and is reported with who made it.
 */
import { createInterface } from "node:readline/promises";
import type { ConfirmInput } from "../kernel/decision.js";
import type { RunEvent } from "../kernel/events.js";
import type { PendingConfirmation } from "../kernel/pending.js";
import { esc } from "./escape.js";

export type Answer = Pick<ConfirmInput, "decision" | "comment"> | undefined;

/** What the prompt ended with: an answer, nothing (leave it waiting), or a decision made elsewhere. */
export type Asked = { kind: "answer"; answer: Answer } | { kind: "elsewhere"; event: RunEvent };

export const CHOICES: Record<
  NonNullable<PendingConfirmation["kind"]>,
  { prompt: string; keys: Record<string, ConfirmInput["decision"]>; words: Record<string, ConfirmInput["decision"]> }
> = {
  confirmation: {
    prompt: "[y] approve  [n] reject  [Enter] leave it waiting",
    keys: { y: "approve", a: "approve", n: "reject", r: "reject" },
    words: { yes: "approve", approve: "approve", no: "reject", reject: "reject" },
  },
  in_doubt: {
    prompt: "[y] run it again  [d] mark it done  [n] reject  [Enter] leave it waiting",
    keys: { y: "approve", d: "mark_done", n: "reject" },
    words: { yes: "approve", done: "mark_done", no: "reject" },
  },
  compensation: {
    prompt: "[y] retry the compensation  [s] skip it  [n] stop  [Enter] leave it waiting",
    keys: { y: "approve", s: "skip", n: "reject" },
    words: { yes: "approve", skip: "skip", no: "reject" },
  },
};

/** Whether an event ends the wait of `stepId` (decided, or the run cancelled or ended). */
export function endsWait(e: RunEvent, stepId: string): boolean {
  if (e.type === "run_cancel_requested" || e.type === "run_completed" || e.type === "run_failed") return true;
  return e.stepId === stepId && (e.type === "step_confirmed" || e.type === "step_cancelled");
}

/** "rejected by Bob Stone (via console)" from a step_confirmed / run_cancel_requested event. */
export function decidedText(e: RunEvent): string {
  const by = e.data.by as { id?: string; name?: string } | undefined;
  const who = by ? ` by ${esc(by.name ?? by.id ?? "someone")}` : "";
  const via = typeof e.data.via === "string" ? ` (via ${esc(e.data.via)})` : "";
  if (e.type === "step_confirmed") {
    const d = String(e.data.decision);
    const what = { approve: "approved", reject: "rejected", mark_done: "marked done", skip: "skipped" }[d] ?? d;
    return `${what}${who}${via}`;
  }
  if (e.type === "run_cancel_requested") return `cancelled with the run${who}${via}`;
  return e.type.replace(/_/g, " ");
}

/** One key from a raw-mode terminal: "enter", "cancel" (Ctrl-C / Ctrl-D / Esc), or the lowercased character. */
function readKey(input: NodeJS.ReadStream, signal: AbortSignal): Promise<string | null> {
  return new Promise((resolve) => {
    const wasRaw = input.isRaw;
    const done = (k: string | null) => {
      input.off("data", onData);
      signal.removeEventListener("abort", onAbort);
      input.setRawMode(wasRaw);
      input.pause();
      resolve(k);
    };
    // a pasted "y\r" arrives as one chunk: its first key is the answer, the rest is dropped
    const onData = (d: Buffer) => {
      const s = d.toString("utf8");
      const c = s[0] ?? "";
      if (c === "\r" || c === "\n") return done("enter");
      if (c === "\u0003" || c === "\u0004" || s === "\u001b") return done("cancel");
      if (c === "\u001b") return; // arrow keys and other escape sequences
      done(c.toLowerCase());
    };
    const onAbort = () => done(null);
    signal.addEventListener("abort", onAbort, { once: true });
    input.setRawMode(true);
    input.resume();
    input.on("data", onData);
  });
}

async function readLine(question: string, signal: AbortSignal): Promise<string | null> {
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  signal.addEventListener("abort", onAbort, { once: true });
  rl.once("SIGINT", onAbort);
  rl.once("close", onAbort);
  try {
    return (await rl.question(question, { signal: stop.signal })).trim().toLowerCase();
  } catch (e) {
    if ((e as Error).name !== "AbortError") throw e;
    return signal.aborted ? null : "cancel";
  } finally {
    signal.removeEventListener("abort", onAbort);
    rl.close();
  }
}

export interface AskOptions {
  out: (line: string) => void;
  /** The run's events after `after`, to notice a decision made elsewhere; omitted: not followed. */
  watch?: { events: (after: number) => Promise<RunEvent[]>; after: number; everyMs?: number };
}

/** Ask a person to decide `p`; a decision made elsewhere meanwhile ends the prompt. */
export async function ask(p: PendingConfirmation, o: AskOptions): Promise<Asked> {
  const c = CHOICES[p.kind ?? "confirmation"];
  const stop = new AbortController();
  let elsewhere: RunEvent | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  if (o.watch) {
    let after = o.watch.after;
    const poll = async () => {
      try {
        for (const e of await o.watch!.events(after)) {
          after = Math.max(after, e.seq);
          if (!elsewhere && endsWait(e, p.stepId)) {
            elsewhere = e;
            stop.abort();
          }
        }
      } catch {
        // the next poll tries again; the answer itself reports a real problem
      }
      if (!stop.signal.aborted) timer = setTimeout(() => void poll(), o.watch!.everyMs ?? 500);
    };
    timer = setTimeout(() => void poll(), 0);
  }
  const tty = Boolean(process.stdin.isTTY && typeof process.stdin.setRawMode === "function");
  const question = `Decide "${esc(p.stepId)}": ${c.prompt} › `;
  try {
    for (;;) {
      let a: string | null;
      if (tty) {
        process.stdout.write(question);
        a = await readKey(process.stdin, stop.signal);
        process.stdout.write(a && a !== "enter" && a !== "cancel" ? `${esc(a)}\n` : "\n");
      } else a = await readLine(question, stop.signal);
      if (a === null) return { kind: "elsewhere", event: elsewhere! };
      if (a === "" || a === "enter" || a === "cancel") return { kind: "answer", answer: undefined };
      const decision = c.keys[a] ?? c.words[a];
      if (decision) return { kind: "answer", answer: { decision } };
      o.out(`"${esc(a)}": press ${Object.keys(c.keys).join(", ")}, or Enter to leave it waiting`);
    }
  } finally {
    stop.abort();
    clearTimeout(timer);
  }
}
