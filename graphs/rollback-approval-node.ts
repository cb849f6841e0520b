/**
 * Strict rollback stopped at a failed compensation: interrupt for an operator. The resume value is
 * the usual `{ decisions: { [stepId]: { decision } } }`: approve = retry the compensation, skip =
 * leave that step undone and continue, reject = stop the rollback. `{ cancel: true }` stops too.
 */
import { interrupt, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { ErrorCode } from "../src/kernel/errors.js";
import { EventType } from "../src/kernel/events.js";
import { compensationPending, RESUME_SHAPE, parseResume, type ConfirmationInterrupt } from "./approval-node.js";
import { emitter } from "./emit.js";
import type { RuntimeEnv } from "./env.js";
import type { RollbackAction, RunState, RunUpdate } from "./state.js";

const ACTION: Record<string, RollbackAction> = { approve: "retry", skip: "skip", reject: "stop" };

export function makeRollbackApprovalNode(env: RuntimeEnv) {
  return async function rollback_approval(state: RunState, config: LangGraphRunnableConfig): Promise<RunUpdate> {
    const b = state.rollbackBlocked!;
    const skillName = state.plan.steps.find((s) => s.stepId === b.stepId)!.skillName;
    // a decision answers this block only if it is for this round (or names none)
    const forThis = (d: { round?: number } | undefined) => d !== undefined && (d.round === undefined || d.round === b.round);
    const taken = env.controls.take(state.runId).get(b.stepId);
    if (forThis(taken) && ACTION[taken!.decision]) return { rollbackDecision: { stepId: b.stepId, action: ACTION[taken!.decision]! } };
    const payload: ConfirmationInterrupt = {
      type: "confirmation",
      runId: state.runId,
      pending: [compensationPending(skillName, b)],
      resume: { shape: RESUME_SHAPE, example: { decisions: { [b.stepId]: { decision: "approve", comment: "retry the compensation" } } } },
    };
    // a refused resume value raises the interrupt again with the reason (see approval-node.ts)
    let resumeError: ConfirmationInterrupt["resumeError"];
    for (let i = 0; ; i++) {
      const raw = interrupt(resumeError ? { ...payload, resumeError } : payload);
      const parsed = parseResume(raw);
      if (parsed.success && "cancel" in parsed.data) return { rollbackDecision: { stepId: b.stepId, action: "stop" } };
      const d = parsed.success && "decisions" in parsed.data ? parsed.data.decisions[b.stepId] : undefined;
      const action = d && forThis(d) ? ACTION[d.decision] : undefined;
      if (action) return { rollbackDecision: { stepId: b.stepId, action } };
      resumeError = !parsed.success
        ? { code: ErrorCode.INVALID_DECISION, message: `${parsed.error.issues[0]?.path.join(".") || "resume"}: ${parsed.error.issues[0]?.message ?? "invalid"}; expected ${RESUME_SHAPE}` }
        : d && forThis(d)
          ? { code: ErrorCode.INVALID_DECISION, message: `decisions.${b.stepId}.decision: a failed compensation takes approve (retry), skip or reject (stop), not ${d.decision}` }
          : { code: ErrorCode.CONFIRMATION_NOT_PENDING, message: `decisions: the rollback waits for a decision on step "${b.stepId}" (round ${b.round})` };
      emitter(config, env)(EventType.resume_rejected, b.stepId, { ...resumeError }, `rollback@${b.round}#${i}`);
    }
  };
}
