/**
 * What a person sees of approvals: on each waiting step under a policy, `approval: { policy,
 * required, given, youMayDecide }` for the calling principal, and the inbox of what they may
 * decide (`GET /api/tool-chains/decisions`). Computed per request (the cached view body is the
 * same for everyone; `youMayDecide` is not).
 */
import type { PendingConfirmation } from "../kernel/pending.js";
import type { Decision } from "../kernel/decision.js";
import { rolesAllow } from "../kernel/actor.js";
import { quorumOf, refusal, type ApprovalPolicy } from "../kernel/approval-policy.js";
import type { Runtime } from "../runtime/runtime.js";
import { actorOf, rolesOf, type Principal } from "../store/access-store.js";
import { voterOf } from "../store/run-store.js";
import type { ToolChainPlan } from "../plan/schema.js";
import type { Requester } from "../plan/admission.js";

export interface ApprovalState {
  policy: ApprovalPolicy;
  required: number;
  given: {
    by: Decision["by"];
    decision: Decision["decision"];
    at: string | null;
    via: Decision["via"] | null;
    comment: string | null;
  }[];
  youMayDecide: boolean;
}

type Decorated = PendingConfirmation & { approval?: ApprovalState };

/** The pending confirmations with their approval state for principal `p` (unchanged where no policy holds). */
export async function withApprovals(
  runtime: Runtime,
  p: Principal,
  runId: string,
  plan: ToolChainPlan,
  pending: readonly PendingConfirmation[],
  requester: Requester | null | undefined,
): Promise<Decorated[]> {
  // the principal's workspace is the run's (runs are read within their workspace only)
  const policies = pending.map((c) => runtime.policyOf({ plan, workspaceId: p.workspaceId }, c));
  if (!policies.some(Boolean)) return [...pending];
  const votes = await runtime.store.listApprovals(runId);
  // deadlines are held by the run row (the wait's first event), not by the graph state the view is built from
  const deadlines = policies.some((x) => x?.expiresAfterMs)
    ? ((await runtime.store.getRow(runId))?.pendingConfirmations ?? [])
    : [];
  const me = `${actorOf(p).kind}:${actorOf(p).id}`;
  return pending.map((c, i) => {
    const policy = policies[i];
    if (!policy) return c;
    const mine = votes.filter((v) => v.stepId === c.stepId && v.round === (c.round ?? 0));
    const allowed = !refusal(
      policy,
      { by: actorOf(p), via: "rest", roles: rolesOf(p) },
      requester ?? undefined,
      "approve",
    );
    const d = deadlines.find((x) => x.expiresAt && x.stepId === c.stepId && (x.round ?? 0) === (c.round ?? 0));
    return {
      ...c,
      ...(d ? { expiresAt: d.expiresAt, onExpiry: d.onExpiry ?? "reject" } : {}),
      approval: {
        policy,
        required: quorumOf(policy),
        given: mine.map((v) => ({
          by: v.decision.by,
          decision: v.decision.decision,
          at: v.decision.at ?? null,
          via: v.decision.via ?? null,
          comment: v.decision.comment ?? null,
        })),
        youMayDecide: allowed && rolesAllow(rolesOf(p), "decide") && !mine.some((v) => voterOf(v.decision) === me),
      },
    };
  });
}

export interface InboxItem {
  runId: string;
  stepId: string;
  round: number;
  skillName: string;
  arguments: unknown;
  preview: unknown;
  requestedBy: Requester | null;
  runCreatedAt: string;
  approval: ApprovalState | null;
  youMayDecide: boolean;
}

/** Bounded: the oldest waiting runs of the workspace, up to this many, are looked at. */
const INBOX_RUNS = 500;

/**
 * Waiting confirmations of the principal's workspace, oldest run first; `mine`: only those this
 * principal may decide now (its roles allow deciding, the policy admits it, it has not voted).
 */
export async function inbox(runtime: Runtime, p: Principal, mine: boolean, mayDecide: boolean): Promise<InboxItem[]> {
  const runs: { runId: string; createdAt: string }[] = [];
  let cursor: string | undefined;
  do {
    const page = await runtime.store.listRuns({
      workspaceId: p.workspaceId,
      statuses: ["waiting_confirmation"],
      limit: 200,
      cursor,
    });
    runs.push(...page.runs);
    cursor = page.nextCursor ?? undefined;
  } while (cursor && runs.length < INBOX_RUNS);
  runs.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
  const out: InboxItem[] = [];
  for (const s of runs) {
    const row = await runtime.store.getRow(s.runId);
    if (!row || row.workspaceId !== p.workspaceId) continue;
    const requester = row.admission?.requestedBy ?? null;
    for (const c of await withApprovals(runtime, p, row.runId, row.plan, row.pendingConfirmations, requester)) {
      const approval = c.approval ?? null;
      const youMayDecide = mayDecide && (approval ? approval.youMayDecide : true);
      if (mine && !youMayDecide) continue;
      out.push({
        runId: row.runId,
        stepId: c.stepId,
        round: c.round ?? 0,
        skillName: c.skillName,
        arguments: c.arguments,
        preview: c.preview,
        requestedBy: requester,
        runCreatedAt: s.createdAt,
        approval,
        youMayDecide,
      });
    }
  }
  return out;
}
