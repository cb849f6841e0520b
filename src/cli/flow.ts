/**
 * Following a run until it settles, and what happens at a confirmation: shown with its preview
 * and resolved arguments, then approved (`--yes`), asked (a terminal on stdin and stdout), or
 * left waiting (`--no-input`, `--json`, or no terminal) with how to decide later.
 */
import type { PendingConfirmation } from "../kernel/pending.js";
import type { RunView } from "../kernel/run-view.js";
import type { Backend, Execution } from "./backend.js";
import { exitForStatus, type ExitCode } from "./exit.js";
import type { Progress } from "./live.js";
import { RunModel } from "./model.js";
import { esc } from "./escape.js";
import { ask, decidedText, endsWait, type Answer } from "./prompt.js";
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

/** Ask a person to decide `p` on the terminal; undefined: leave it waiting (demo.ts; nothing else decides its runs). */
export async function askOnce(p: PendingConfirmation, io: Io): Promise<Answer> {
  const r = await ask(p, { out: io.out });
  return r.kind === "answer" ? r.answer : undefined;
}

const lastSeq = async (backend: Backend, runId: string) =>
  (await backend.events(runId, 0).catch(() => [])).reduce((m, e) => Math.max(m, e.seq), 0);

/** A decision made elsewhere resumed the run: poll its view until it settles again. */
async function settledElsewhere(backend: Backend, runId: string): Promise<RunView> {
  for (;;) {
    const v = await backend.getRun(runId);
    if (v.status !== "running" && v.status !== "queued" && v.status !== "planning") return v;
    await new Promise((r) => setTimeout(r, 300));
  }
}

/**
 * Settle `first`, then answer confirmations until the run ends or one is left waiting. The
 * exit code follows the last view: 0 completed, 3 waiting, 1 any other end.
 */
export async function settle(
  backend: Backend,
  first: Execution,
  model: RunModel,
  io: Io,
  d: Decide,
): Promise<{ view: RunView; exit: ExitCode }> {
  let view = await follow(first, model, io, backend.where);
  let decided = 0;
  for (;;) {
    const p = view.status === "waiting_confirmation" ? view.pendingConfirmations[0] : undefined;
    if (!p) break;
    if (!io.json) {
      io.out("");
      for (const q of view.pendingConfirmations) io.out(confirmationLines(q, io.style, view.runId).join("\n"));
      io.out("");
    }
    let answer: Answer;
    if (d.yes) answer = { decision: "approve", comment: "approved with --yes" };
    else if (io.interactive) {
      // follow the run while asking: someone may decide this step elsewhere meanwhile
      const asked = await ask(p, {
        out: io.out,
        watch: { events: (after) => backend.events(view.runId, after), after: await lastSeq(backend, view.runId) },
      });
      if (asked.kind === "elsewhere") {
        const e = asked.event;
        io.out(
          e.type === "step_confirmed"
            ? `Step "${esc(p.stepId)}" was ${decidedText(e)} while this prompt was open.`
            : `Run ${esc(view.runId)} was ${decidedText(e)} while this prompt was open.`,
        );
        decided++;
        view = await settledElsewhere(backend, view.runId);
        continue;
      }
      answer = asked.answer;
    }
    if (!answer) {
      if (!io.json) io.out(howToConfirm(view, io.connection, decided).join("\n"));
      break;
    }
    if (!io.json)
      io.out(
        `${answer.decision === "approve" ? "Approving" : answer.decision === "reject" ? "Rejecting" : `Deciding ${answer.decision} for`} "${esc(p.stepId)}"…`,
      );
    let next: Execution;
    try {
      next = await backend.confirm(view.runId, {
        stepId: p.stepId,
        ...answer,
        ...(p.round !== undefined ? { round: p.round } : {}),
      });
    } catch (e) {
      // decided elsewhere between the last look and the answer: say what happened and who did it
      if ((e as { code?: string }).code !== "CONFIRMATION_NOT_PENDING") throw e;
      const theirs = (await backend.events(view.runId, 0).catch(() => [])).filter((x) => endsWait(x, p.stepId)).pop();
      if (!theirs) throw e;
      io.out(`Step "${esc(p.stepId)}" was already ${decidedText(theirs)}; your answer was not recorded.`);
      decided++;
      view = await settledElsewhere(backend, view.runId);
      continue;
    }
    decided++;
    view = await follow(next, model, io);
  }
  // the run's own time (first to last event, less its waits for a person), as the header showed it
  if (!io.json)
    io.out(summaryLine(view, io.style, model.lastAt !== undefined ? model.workedMs(model.lastAt) : undefined));
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
