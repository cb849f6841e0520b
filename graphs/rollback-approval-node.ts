/**
 * Strict rollback stopped at a failed compensation: interrupt for an operator. The resume value is
 * the usual `{ decisions: { [stepId]: { decision } } }`: approve = retry the compensation, skip =
 * leave that step undone and continue, reject = stop the rollback. `{ cancel: true }` stops too.
 */
import { interrupt, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { ErrorCode } from "../src/kernel/errors.js";
import { EventType } from "../src/kernel/events.js";
import { compensationPending, RESUME_SHAPE, parseResume, type ConfirmationInterrupt } from "./approval-node.js";
import { fromAgentInbox, humanInterrupt } from "./agent-inbox.js";
import { emitter } from "./emit.js";
import type { RuntimeEnv } from "./env.js";
import type { Decision, RollbackAction, RunState, RunUpdate } from "./state.js";

const ACTION: Record<string, RollbackAction> = { approve: "retry", skip: "skip", reject: "stop" };

/** The answer as state keeps it: the action and who decided (the audit trail of a compensation decision). */
function answered(
  stepId: string,
  action: RollbackAction,
  d: Decision | undefined,
): NonNullable<RunState["rollbackDecision"]> {
  return {
    stepId,
    action,
    ...(d?.by ? { by: d.by } : {}),
    ...(d?.via ? { via: d.via } : {}),
    ...(d?.comment ? { comment: d.comment } : {}),
  };
}

export function makeRollbackApprovalNode(env: RuntimeEnv) {
  return async function rollback_approval(state: RunState, config: LangGraphRunnableConfig): Promise<RunUpdate> {
    const b = state.rollbackBlocked!;
    const skillName = state.plan.steps.find((s) => s.stepId === b.stepId)!.skillName;
    // a decision answers this block only if it is for this round (or names none)
    const forThis = (d: { round?: number } | undefined) =>
      d !== undefined && (d.round === undefined || d.round === b.round);
    const taken = env.controls.take(state.runId).get(b.stepId);
    if (forThis(taken) && ACTION[taken!.decision])
      return { rollbackDecision: answered(b.stepId, ACTION[taken!.decision]!, taken) };
    const pending = [compensationPending(skillName, b)];
    const payload: ConfirmationInterrupt = {
      type: "confirmation",
      runId: state.runId,
      pending,
      ...humanInterrupt(state.runId, pending),
      resume: {
        shape: RESUME_SHAPE,
        example: { decisions: { [b.stepId]: { decision: "approve", comment: "retry the compensation" } } },
      },
    };
    // a refused resume value raises the interrupt again with the reason (see approval-node.ts)
    let resumeError: ConfirmationInterrupt["resumeError"];
    for (let i = 0; ; i++) {
      let raw = interrupt(resumeError ? { ...payload, resumeError } : payload);
      // Agent Inbox: accept retries the compensation, ignore leaves the rollback waiting
      const inbox = fromAgentInbox(raw, pending);
      if (inbox?.kind === "ignore") continue;
      if (inbox?.kind === "decisions") raw = inbox.value;
      const parsed =
        inbox?.kind === "invalid"
          ? { success: false as const, error: { issues: [{ path: ["resume"], message: inbox.message }] } }
          : parseResume(raw);
      if (parsed.success && "cancel" in parsed.data) return { rollbackDecision: { stepId: b.stepId, action: "stop" } };
      const d = parsed.success && "decisions" in parsed.data ? parsed.data.decisions[b.stepId] : undefined;
      const action = d && forThis(d) ? ACTION[d.decision] : undefined;
      if (action) return { rollbackDecision: answered(b.stepId, action, d && (d.via ? d : { ...d, via: "studio" })) };
      resumeError = !parsed.success
        ? {
            code: ErrorCode.INVALID_DECISION,
            message: `${parsed.error.issues[0]?.path.join(".") || "resume"}: ${parsed.error.issues[0]?.message ?? "invalid"}; expected ${RESUME_SHAPE}`,
          }
        : d && forThis(d)
          ? {
              code: ErrorCode.INVALID_DECISION,
              message: `decisions.${b.stepId}.decision: a failed compensation takes approve (retry), skip or reject (stop), not ${d.decision}`,
            }
          : {
              code: ErrorCode.CONFIRMATION_NOT_PENDING,
              message: `decisions: the rollback waits for a decision on step "${b.stepId}" (round ${b.round})`,
            };
      emitter(config, env, state)(EventType.resume_rejected, b.stepId, { ...resumeError }, `rollback@${b.round}#${i}`);
    }
  };
}
