/**
 * The end of a run: its final status from the step records and its terminal event. The node whose
 * superstep ends the run calls it on its own update (the scheduler, the compensation node, the
 * planner when planning failed), so ending a run costs no superstep of its own: the terminal
 * status is saved in that node's checkpoint, and the event key (`run_completed` / `run_failed` of
 * the run's generation) keeps a node that runs again after a crash from logging it twice.
 */
import { ErrorCode } from "../src/kernel/errors.js";
import { EventType } from "../src/kernel/events.js";
import type { RunStatus } from "../src/kernel/status.js";
import type { Emit } from "./emit.js";
import type { RuntimeEnv } from "./env.js";
import type { RunState, RunUpdate } from "./state.js";
import { isoAt } from "../src/kernel/iso-time.js";

type Settled = Pick<RunState, "steps" | "plan" | "halt" | "status" | "error">;

export function finalStatus(state: Omit<Settled, "error">): RunStatus {
  // only planning (and a scheduler finding an edited plan invalid) set "failed" before the end
  if (state.status === "failed") return "failed";
  const recs = Object.values(state.steps);
  if (state.halt) {
    const rollbackFailed = recs.some(
      (r) => r.rollback === "rollback_failed" || r.rollback === "not_compensable" || r.rollback === "pending",
    );
    if (rollbackFailed) return "rollback_failed";
    if (state.halt === "cancelled") return "cancelled";
    return recs.some((r) => r.rollback === "rolled_back") ? "rolled_back" : "failed";
  }
  const policyOf = new Map(state.plan.steps.map((s) => [s.stepId, s.onFailure ?? state.plan.onFailure]));
  const failed = Object.entries(state.steps).some(
    ([id, r]) => r.status === "failed" && policyOf.get(id) !== "continue",
  );
  return failed ? "failed" : "completed";
}

/** The state a node's update leaves (the reducers of graphs/state.ts for the fields read here). */
function settle(state: RunState, update: RunUpdate): Settled {
  const pick = <K extends keyof Settled>(k: K): Settled[K] =>
    update[k] !== undefined ? (update[k] as Settled[K]) : state[k];
  return {
    steps: update.steps ? { ...state.steps, ...(update.steps as RunState["steps"]) } : state.steps,
    plan: pick("plan"),
    halt: pick("halt"),
    status: pick("status"),
    error: pick("error"),
  };
}

/** `update`, the last of the run, with the final status and error; emits the terminal event. */
export function finishRun(state: RunState, update: RunUpdate, emit: Emit, env: Pick<RuntimeEnv, "now">): RunUpdate {
  const after = settle(state, update);
  const status = finalStatus(after);
  let error = after.error;
  if (!error && status === "failed") {
    const first = after.plan.steps
      .map((s) => [s.stepId, after.steps[s.stepId]] as const)
      .find(([, r]) => r?.status === "failed");
    if (first)
      error = {
        code: first[1]!.error?.code ?? ErrorCode.EXECUTION_FAILED,
        message: `step "${first[0]}" failed: ${first[1]!.error?.message ?? "unknown error"}`,
      };
  }
  if (status === "completed") emit(EventType.run_completed, undefined, { status });
  else {
    // a cancelled run's final event names who cancelled it (the cancel error carries the principal)
    const d =
      error?.code === ErrorCode.CANCELLED ? (error.details as { by?: unknown; via?: unknown } | undefined) : undefined;
    emit(EventType.run_failed, undefined, {
      status,
      error,
      ...(d?.by ? { by: d.by } : {}),
      ...(d?.via ? { via: d.via } : {}),
    });
  }
  return {
    ...update,
    status,
    error: status === "completed" ? null : error,
    updatedAt: isoAt(env.now()),
  };
}
