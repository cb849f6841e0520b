/**
 * What a drive's end writes besides the projection: the lifecycle events its final state implies
 * (a crash between a node's checkpoint and its last event batch lost them), and the tests' check
 * that the view a drive ends with is its checkpoint's.
 */
import { eventKey, type EmittedEvent, type EventType } from "../kernel/events.js";
import type { RunView } from "../kernel/run-view.js";
import { TERMINAL_RUN } from "../kernel/status.js";

const TERMINAL_EVENT: Partial<Record<string, EventType>> = {
  completed: "step_completed",
  rolled_back: "step_completed",
  rollback_failed: "step_completed",
  failed: "step_failed",
  skipped: "step_skipped",
  cancelled: "step_cancelled",
};

/**
 * Tests (test/setup/shared-pglite.ts sets TOOLCHAIN_CHECK_STREAMED_VIEW): the view a drive ends
 * with, built from the streamed state, must be the one its checkpoint gives.
 */
export async function sameAsCheckpoint(streamed: RunView, stored: RunView): Promise<void> {
  const a = JSON.stringify(streamed);
  const b = JSON.stringify(stored);
  if (a !== b) throw new Error(`the streamed final view differs from the checkpoint's:\n${a}\n${b}`);
}

/** The lifecycle events a settled view implies, with the keys the nodes use for them (a redriven step's included). */
export function backfill(view: RunView): EmittedEvent[] {
  const at = view.updatedAt;
  const redrives = view.redrives ?? [];
  const runGen = redrives.length;
  const stepGen = (id: string) => redrives.findLast((r) => r.steps.includes(id))?.n ?? 0;
  const out: EmittedEvent[] = [
    { type: "planning_started", at: view.createdAt, data: { backfilled: true }, key: "planning_started::" },
  ];
  if (view.steps.some((s) => s.status !== "pending"))
    out.push({
      type: "planning_completed",
      at: view.createdAt,
      data: { backfilled: true },
      key: "planning_completed::",
    });
  for (const r of redrives)
    out.push({
      type: "run_redriven",
      at: r.at,
      data: { ...r, backfilled: true },
      key: eventKey("run_redriven", undefined, `${r.n}`, r.n),
    });
  for (const s of view.steps) {
    const type = TERMINAL_EVENT[s.status];
    if (!type) continue;
    out.push({
      type,
      stepId: s.stepId,
      at: s.finishedAt ?? at,
      data: { backfilled: true, ...(s.error ? { error: s.error } : {}) },
      key: eventKey(type, s.stepId, "", stepGen(s.stepId)),
    });
  }
  if (view.status === "completed")
    out.push({
      type: "run_completed",
      at,
      data: { status: view.status, backfilled: true },
      key: eventKey("run_completed", undefined, "", runGen),
    });
  else if (TERMINAL_RUN.has(view.status)) {
    // a strict rollback waiting for its operator ends the run until the operator answers; the
    // run_failed of the resumed rollback's end (graphs/finish.ts) is a later end with a key of its own
    const block = view.pendingConfirmations.find((p) => p.kind === "compensation");
    out.push({
      type: "run_failed",
      at,
      data: { status: view.status, error: view.error, backfilled: true },
      key: eventKey("run_failed", undefined, block ? `rollback@${block.round}` : "", runGen),
    });
  }
  return out;
}
