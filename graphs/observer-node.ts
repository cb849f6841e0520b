/**
 * The observer closes a run: it derives the final status from the step records and emits the
 * run's terminal event.
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { ErrorCode } from "../src/kernel/errors.js";
import { EventType } from "../src/kernel/events.js";
import type { RunStatus } from "../src/kernel/status.js";
import { emitter } from "./emit.js";
import type { RuntimeEnv } from "./env.js";
import type { RunState, RunUpdate } from "./state.js";

export function finalStatus(state: Pick<RunState, "steps" | "plan" | "halt" | "status">): RunStatus {
  // only the planner (and a scheduler finding an edited plan invalid) set "failed" before this node
  if (state.status === "failed") return "failed";
  const recs = Object.values(state.steps);
  if (state.halt) {
    const rollbackFailed = recs.some((r) => r.rollback === "rollback_failed" || r.rollback === "not_compensable" || r.rollback === "pending");
    if (rollbackFailed) return "rollback_failed";
    if (state.halt === "cancelled") return "cancelled";
    return recs.some((r) => r.rollback === "rolled_back") ? "rolled_back" : "failed";
  }
  const policyOf = new Map(state.plan.steps.map((s) => [s.stepId, s.onFailure ?? state.plan.onFailure]));
  const failed = Object.entries(state.steps).some(([id, r]) => r.status === "failed" && policyOf.get(id) !== "continue");
  return failed ? "failed" : "completed";
}

export function makeObserverNode(env: RuntimeEnv) {
  return async function observer(state: RunState, config: LangGraphRunnableConfig): Promise<RunUpdate> {
    const status = finalStatus(state);
    let error = state.error;
    if (!error && status === "failed") {
      const first = state.plan.steps.map((s) => [s.stepId, state.steps[s.stepId]] as const).find(([, r]) => r?.status === "failed");
      if (first) error = { code: first[1]!.error?.code ?? ErrorCode.EXECUTION_FAILED, message: `step "${first[0]}" failed: ${first[1]!.error?.message ?? "unknown error"}` };
    }
    const emit = emitter(config, env);
    if (status === "completed") emit(EventType.run_completed, undefined, { status });
    else emit(EventType.run_failed, undefined, { status, error });
    return { status, error: status === "completed" ? null : error, updatedAt: new Date(env.now()).toISOString() };
  };
}
