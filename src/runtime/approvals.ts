/**
 * A decision meets the step's approval policy (src/kernel/approval-policy.ts): the principal is
 * checked, and under a quorum each approval is a durable vote (one per step, round and principal,
 * in the store) until enough distinct principals approved; only then does the runtime hand the
 * scheduler the final decision, carrying every approval. A reject by any allowed principal rejects.
 */
import type { PendingConfirmation } from "../kernel/pending.js";
import type { Decision } from "../kernel/decision.js";
import type { Actor, Decider } from "../kernel/actor.js";
import { policyOfWait, quorumOf, refusal, type ApprovalPolicy } from "../kernel/approval-policy.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { EventType } from "../kernel/events.js";
import type { ToolChainPlan } from "../plan/schema.js";
import type { Skill } from "../skills/contract.js";
import { voterOf, type RunStore } from "../store/run-store.js";

/** The policy a wait is under (src/kernel/approval-policy.ts policyOfWait), with the workspace default as its floor. */
export function policyFor(
  skillOf: (name: string) => Skill | undefined,
  plan: ToolChainPlan,
  pending: Pick<PendingConfirmation, "stepId" | "skillName" | "kind">,
  floor?: ApprovalPolicy,
): ApprovalPolicy | undefined {
  return policyOfWait({ skillOf, plan, ...(floor ? { floor } : {}) }, pending);
}

export type VoteOutcome = { proceed: Decision } | { counted: Decision[] };

/**
 * Check `decision` (its `by`, `via`, `at` and `round` set) against the policy; under a quorum,
 * record the vote. Throws NOT_ALLOWED_TO_DECIDE, REQUESTER_CANNOT_APPROVE, or
 * CONFIRMATION_NOT_PENDING for a second vote that differs from the principal's first.
 */
export async function castVote(
  store: RunStore,
  runId: string,
  stepId: string,
  decision: Decision,
  policy: ApprovalPolicy | undefined,
  who: Decider,
  requester: Actor | undefined,
): Promise<VoteOutcome> {
  const refused = refusal(policy, who, requester, decision.decision);
  if (refused) throw refused;
  const quorum = quorumOf(policy);
  if (quorum <= 1) return { proceed: decision };
  const round = decision.round ?? 0;
  if (decision.decision !== "approve") {
    const mine = (await store.listApprovals(runId)).find(
      (v) => v.stepId === stepId && v.round === round && voterOf(v.decision) === voterOf(decision),
    );
    if (mine)
      throw new ToolchainError(
        ErrorCode.CONFIRMATION_NOT_PENDING,
        `${who.by.id} already approved step "${stepId}" in round ${round}; a different second decision is refused`,
      );
    return { proceed: decision };
  }
  if (decision.arguments) {
    // every approver must have seen the same arguments
    throw new ToolchainError(
      ErrorCode.INVALID_DECISION,
      `arguments: step "${stepId}" needs ${quorum} approvals (its approval policy); edited arguments need a policy without a quorum`,
    );
  }
  const { result, votes } = await store.recordApproval(runId, stepId, round, decision);
  if (result === "conflict")
    throw new ToolchainError(
      ErrorCode.CONFIRMATION_NOT_PENDING,
      `${who.by.id} already voted differently on step "${stepId}" in round ${round}`,
    );
  if (votes.length < quorum) {
    if (result === "recorded") {
      await store.append(runId, [
        {
          type: EventType.approval_given,
          at: decision.at ?? new Date().toISOString(),
          // no event stepId: a vote does not move the step (the projection keys statuses on it)
          data: {
            stepId,
            round,
            by: decision.by,
            via: decision.via,
            ...(decision.comment ? { comment: decision.comment } : {}),
            given: votes.length,
            required: quorum,
          },
          key: `approval_given:${stepId}:${round}:${voterOf(decision)}`,
        },
      ]);
    }
    return { counted: votes };
  }
  const approvals = votes.map((v) => ({
    by: v.by!,
    ...(v.via ? { via: v.via } : {}),
    ...(v.at ? { at: v.at } : {}),
    ...(v.comment ? { comment: v.comment } : {}),
  }));
  return { proceed: { ...decision, approvals } };
}
