/**
 * Following a run until it settles, and what happens at a confirmation: shown with its preview
 * and resolved arguments, then approved (`--yes`), asked (a terminal on stdin and stdout), or
 * left waiting (`--no-input`, `--json`, or no terminal) with how to decide later.
 */
import { createInterface } from "node:readline/promises";
import type { PendingConfirmation } from "../kernel/pending.js";
import type { ConfirmInput } from "../kernel/decision.js";
import type { RunView } from "../runtime/view.js";
import type { Backend, Execution } from "./backend.js";
import { exitForStatus, type ExitCode } from "./exit.js";
import type { Progress } from "./live.js";
import { RunModel } from "./model.js";
import { esc } from "./escape.js";
import { confirmationLines, howToConfirm, summaryLine, type Style } from "./render.js";

export interface Io {
  out: (line: string) => void;
  progress: Progress;
  style: Style;
  /** Ask a person (stdin and stdout are a terminal, no --no-input / --json). */
  interactive: boolean;
  /** The connection flags to repeat in hints (`--url http://…`), empty locally. */
  connection: string;
  json: boolean;
}

export interface Decide {
  /** --yes: approve every confirmation. */
  yes: boolean;
}

/** Draw the execution's events until it settles; the settled view. */
export async function follow(exec: Execution, model: RunModel, io: Io, where?: string): Promise<RunView> {
  io.progress.begin(model, where);
  try {
    for await (const e of exec.events) io.progress.event(e);
    return await exec.result;
  } finally {
    io.progress.end();
  }
}

type Answer = Pick<ConfirmInput, "decision" | "comment"> | undefined;

const CHOICES: Record<NonNullable<PendingConfirmation["kind"]>, { prompt: string; map: Record<string, ConfirmInput["decision"]> }> = {
  confirmation: { prompt: "[y] approve  [n] reject  [Enter] leave it waiting", map: { y: "approve", yes: "approve", a: "approve", approve: "approve", n: "reject", no: "reject", r: "reject", reject: "reject" } },
  in_doubt: { prompt: "[y] run it again  [d] mark it done  [n] reject  [Enter] leave it waiting", map: { y: "approve", yes: "approve", d: "mark_done", done: "mark_done", n: "reject", no: "reject" } },
  compensation: { prompt: "[y] retry the compensation  [s] skip it  [n] stop  [Enter] leave it waiting", map: { y: "approve", yes: "approve", s: "skip", skip: "skip", n: "reject", no: "reject" } },
};

/** Ask a person to decide `p` on the terminal; undefined: leave it waiting. */
export async function ask(p: PendingConfirmation, io: Io): Promise<Answer> {
  const c = CHOICES[p.kind ?? "confirmation"];
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  // Ctrl-C at the prompt leaves the run waiting (and says how to decide later), like Enter
  const abort = new AbortController();
  rl.once("SIGINT", () => abort.abort());
  // so does the end of input (Ctrl-D)
  rl.once("close", () => abort.abort());
  try {
    for (;;) {
      let a: string;
      try {
        a = (await rl.question(`Decide "${esc(p.stepId)}": ${c.prompt} › `, { signal: abort.signal })).trim().toLowerCase();
      } catch (e) {
        if ((e as Error).name !== "AbortError") throw e;
        io.out("");
        return undefined;
      }
      if (a === "") return undefined;
      const decision = c.map[a];
      if (decision) return { decision };
      io.out(`"${esc(a)}": answer one of ${Object.keys(c.map).join(", ")}, or press Enter`);
    }
  } finally {
    rl.close();
  }
}

/**
 * Settle `first`, then answer confirmations until the run ends or one is left waiting. The
 * exit code follows the last view: 0 completed, 3 waiting, 1 any other end.
 */
export async function settle(backend: Backend, first: Execution, model: RunModel, io: Io, d: Decide): Promise<{ view: RunView; exit: ExitCode }> {
  let view = await follow(first, model, io, backend.where);
  for (;;) {
    const p = view.status === "waiting_confirmation" ? view.pendingConfirmations[0] : undefined;
    if (!p) break;
    if (!io.json) {
      io.out("");
      for (const q of view.pendingConfirmations) io.out(confirmationLines(q, io.style).join("\n"));
      io.out("");
    }
    const answer: Answer = d.yes ? { decision: "approve", comment: "approved with --yes" } : io.interactive ? await ask(p, io) : undefined;
    if (!answer) {
      if (!io.json) io.out(howToConfirm(view, io.connection).join("\n"));
      break;
    }
    if (!io.json) io.out(`${answer.decision === "approve" ? "Approving" : answer.decision === "reject" ? "Rejecting" : `Deciding ${answer.decision} for`} "${esc(p.stepId)}"…`);
    const next = await backend.confirm(view.runId, { stepId: p.stepId, ...answer, ...(p.round !== undefined ? { round: p.round } : {}) });
    view = await follow(next, model, io);
  }
  // the run's own time (first to last event), not the time a person took to answer
  if (!io.json) io.out(summaryLine(view, io.style, model.createdAt !== undefined && model.lastAt !== undefined ? model.lastAt - model.createdAt : undefined));
  return { view, exit: exitForStatus(view.status) };
}

/** One line per output of a finished run (the whole result is in `--json` and `show --json`). */
export function outputLines(view: RunView, width: number): string[] {
  if (!view.result) return [];
  return Object.entries(view.result.outputs).map(([id, v]) => {
    const s = `  ${esc(id)}: ${esc(JSON.stringify(v) ?? "null")}`;
    return s.length > width ? `${s.slice(0, width - 1)}…` : s;
  });
}
