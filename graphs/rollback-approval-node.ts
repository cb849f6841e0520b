/**
 * Strict rollback stopped at a failed compensation: interrupt for an operator. The resume value is
 * the usual `{ decisions: { [stepId]: { decision } } }`: approve = retry the compensation, skip =
 * leave that step undone and continue, reject = stop the rollback. `{ cancel: true }` stops too.
 */
import { interrupt, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { compensationPending, ResumeSchema, type ConfirmationInterrupt } from "./approval-node.js";
import type { RuntimeEnv } from "./env.js";
import type { RollbackAction, RunState, RunUpdate } from "./state.js";

const ACTION: Record<string, RollbackAction> = { approve: "retry", skip: "skip", reject: "stop" };

export function makeRollbackApprovalNode(env: RuntimeEnv) {
  return async function rollback_approval(state: RunState, _config: LangGraphRunnableConfig): Promise<RunUpdate> {
    const b = state.rollbackBlocked!;
    const skillName = state.plan.steps.find((s) => s.stepId === b.stepId)!.skillName;
    // a decision answers this block only if it is for this round (or names none)
    const forThis = (d: { round?: number } | undefined) => d !== undefined && (d.round === undefined || d.round === b.round);
    const taken = env.controls.take(state.runId).get(b.stepId);
    const early = forThis(taken) ? taken : undefined;
    const payload: ConfirmationInterrupt = { type: "confirmation", runId: state.runId, pending: [compensationPending(skillName, b)] };
    const raw = early ? { decisions: { [b.stepId]: early } } : interrupt(payload);
    const parsed = ResumeSchema.safeParse(raw);
    if (!parsed.success) return {}; // the runtime validates decisions first; the interrupt repeats
    if ("cancel" in parsed.data) return { rollbackDecision: { stepId: b.stepId, action: "stop" } };
    const d = parsed.data.decisions[b.stepId];
    const action = d && forThis(d) && ACTION[d.decision];
    return action ? { rollbackDecision: { stepId: b.stepId, action } } : {};
  };
}
