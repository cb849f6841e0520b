/**
 * Continuing a run that does not execute in this process, from wherever it stands: the graph input
 * for its checkpoint (new-run.ts `continueInput`) with its recorded decisions or cancel, and
 * whether a suspended run holds a request nobody has applied yet.
 */
import type { RunState } from "../kernel/run-state.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { TERMINAL_RUN } from "../kernel/status.js";
import type { RunRow, RunStore } from "../store/run-store.js";
import { latestDecisions } from "./admit-decision.js";
import type { RuntimeCore } from "./core.js";
import type { DriveInput } from "./driver.js";
import { continueInput } from "./new-run.js";
import type { RunHandle } from "./options.js";

/**
 * Drive a run that is not executing in this process, from wherever it stands: a queued run from
 * its plan, a suspended one with the recorded cancel or every unapplied decision, any other from
 * its last checkpoint. If another process holds the run's lease, follow it instead (it polls the
 * store for decisions and cancels and applies them).
 */
export async function continueRun(core: RuntimeCore, runId: string): Promise<RunHandle> {
  const local = core.active.get(runId);
  if (local) return core.handleOf(local);
  const row = await core.store.getRow(runId);
  if (!row) throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
  if (TERMINAL_RUN.has(row.status) && !row.pendingConfirmations.length) return core.follow(runId);
  const input = await inputFor(core, runId, row);
  // another caller in this process may have started it meanwhile (racing duplicate confirms)
  const started = core.active.get(runId);
  if (started) return core.handleOf(started);
  return core.drive(runId, input);
}

/**
 * The graph input that continues a run from where its checkpoint stands. Recorded, unapplied
 * decisions become the resume value, each carrying its round (the graph applies a decision only
 * to the wait it answers); per step, the latest round wins: older ones are stale.
 */
export async function inputFor(
  core: Pick<RuntimeCore, "stateOf" | "store" | "env">,
  runId: string,
  row: RunRow,
): Promise<DriveInput> {
  const snap = await core.stateOf(runId);
  const started = Boolean((snap.values as Partial<RunState>)?.runId);
  const interrupted = Boolean(snap.tasks?.some((t) => (t.interrupts?.length ?? 0) > 0));
  const decisions =
    started && interrupted && !row.cancelRequest ? latestDecisions(await core.store.unappliedDecisions(runId)) : {};
  return continueInput(row, { started, interrupted, decisions }, new Date(core.env.now()).toISOString());
}

/** A decision or a cancel recorded for a suspended run that no drive has applied yet. */
export async function hasRequestToApply(store: RunStore, runId: string, row: RunRow): Promise<boolean> {
  if (!row.pendingConfirmations.length) return false;
  if (row.cancelRequest) return true;
  const ids = new Set(row.pendingConfirmations.map((p) => p.stepId));
  return (await store.unappliedDecisions(runId)).some((d) => ids.has(d.stepId));
}
