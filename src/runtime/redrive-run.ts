/** Redrive: a failed run continued from its own checkpoint (graphs/redrive.ts plans what runs again). */
import type { RunState } from "../kernel/run-state.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { EventType } from "../kernel/events.js";
import { LIBRARY_ACTING, type Acting } from "../kernel/actor.js";
import { assertStorable } from "../kernel/storable.js";
import { continueInput } from "./new-run.js";
import type { RunHandle } from "./options.js";
import { outsideCallerContext } from "./driver.js";
import { planRedrive, REDRIVABLE_RUN, type RedriveOverrides } from "../../graphs/redrive.js";
import { eventKey } from "../kernel/events.js";
import type { RuntimeCore } from "./core.js";

export interface RedriveOptions {
  /** Per failed step, argument fields that replace its last attempt's (graphs/redrive.ts). */
  overrides?: RedriveOverrides;
  /** Leave the execution to a worker process (API-only processes) instead of driving it here. */
  queue?: boolean;
}

/**
 * Redrive a failed run from where it failed (graphs/redrive.ts): completed steps keep their
 * outputs and never run again; failed, skipped and not-started steps run again with the same
 * idempotency keys and continuing attempt numbers; a non-idempotent step whose effect may have
 * happened is reconciled (else a person decides) first. `overrides`: per failed step, argument
 * fields that replace the last attempt's (validated against the skill's input schema, recorded
 * with who changed what). Refused (409) for a run that is not failed (RUN_NOT_REDRIVABLE), that
 * another process is executing (RUN_BEING_DRIVEN), or whose steps were compensated
 * (REDRIVE_COMPENSATED). It continues the run's own checkpoint: never LangGraph's replay/fork.
 */
export async function redriveRun(
  core: RuntimeCore,
  runId: string,
  opts: RedriveOptions = {},
  acting: Acting = LIBRARY_ACTING,
): Promise<RunHandle> {
  const overrides = opts.overrides ?? {};
  assertStorable(overrides, "overrides");
  const row = await core.store.getRow(runId);
  if (!row) throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
  if (core.active.has(runId)) throw beingDriven(runId, "this process");
  if (!REDRIVABLE_RUN.has(row.status))
    throw new ToolchainError(
      ErrorCode.RUN_NOT_REDRIVABLE,
      `run ${runId} is ${row.status}: only a failed run can be redriven`,
      { details: { status: row.status } },
    );
  // the lease fences every other process (a worker recovering it, a racing redrive) from here on
  if (!(await core.store.acquireLease(runId, core.owner, core.leaseTtlMs))) throw beingDriven(runId, "another process");
  let handed = false;
  try {
    const snap = await core.stateOf(runId);
    const state = snap.values as Partial<RunState>;
    if (!state?.runId || (snap.next?.length ?? 0) > 0)
      throw new ToolchainError(
        ErrorCode.RUN_NOT_REDRIVABLE,
        state?.runId
          ? `run ${runId} has not finished executing (its checkpoint continues at ${snap.next.join(", ")})`
          : `run ${runId} has no checkpoint to redrive from (pruned by retention, or it never started)`,
        { details: { status: row.status } },
      );
    const at = new Date(core.env.now()).toISOString();
    const { update, record } = planRedrive(state as RunState, (n) => core.registry.get(n), overrides, acting, at);
    // a new checkpoint at the head of the run's thread, as if the planner had just written it:
    // the next node is the scheduler, which restores the records (completed steps stay done)
    await outsideCallerContext(() => core.graph.updateState({ configurable: { thread_id: runId } }, update, "planner"));
    await core.store.append(
      runId,
      [
        {
          type: EventType.run_redriven,
          at,
          data: { ...record },
          key: eventKey(EventType.run_redriven, undefined, `${record.n}`, record.n),
        },
      ],
      core.owner,
    );
    // queued: the lease is released below and a worker claims the running run
    if (opts.queue) return core.follow(runId);
    const fresh = (await core.store.getRow(runId)) ?? row;
    const handle = core.drive(runId, continueInput(fresh, { started: true, interrupted: false, decisions: {} }, at));
    handed = true;
    return handle;
  } finally {
    // the drive renews and releases the lease it took over; a refusal gives it back
    if (!handed) await core.store.releaseLease(runId, core.owner).catch(() => undefined);
  }
}

function beingDriven(runId: string, where: string): ToolchainError {
  return new ToolchainError(ErrorCode.RUN_BEING_DRIVEN, `run ${runId} is being executed by ${where}`);
}
