/**
 * Approval policies: who may decide a step's confirmation, how many must approve, whether the
 * person who started the run may approve it. A skill declares its policy; a plan step may add or
 * tighten it, never loosen it (`strictest` keeps the stricter side of every field, whoever wrote
 * the plan). Pure: the runtime checks each decision (src/runtime/approvals.ts).
 */
import { z } from "zod";
import { ErrorCode, ToolchainError } from "./errors.js";
import { ROLES, USER_ID, type Actor, type Decider, type Role } from "./actor.js";

export interface ApprovalPolicy {
  /** Only users with one of these workspace roles decide (service and agent principals never match). */
  roles?: Role[];
  /** Only these user ids decide (with `roles`: either matches). */
  users?: string[];
  /** Distinct allowed principals that must approve. @default 1 */
  quorum?: number;
  /** false: the principal who started the run cannot approve its steps. @default true */
  allowRequester?: boolean;
  /** A confirmation not decided within this long is handled by `onExpiry`. */
  expiresAfterMs?: number;
  /** @default "reject" */
  onExpiry?: "reject" | "leave";
}

export const ApprovalPolicySchema = z
  .object({
    roles: z.array(z.enum(ROLES as [Role, ...Role[]])).min(1).max(4).optional(),
    users: z.array(z.string().regex(USER_ID)).min(1).max(100).optional(),
    quorum: z.number().int().min(1).max(20).optional(),
    allowRequester: z.boolean().optional(),
    expiresAfterMs: z.number().int().min(1_000).max(30 * 86_400_000).optional(),
    onExpiry: z.enum(["reject", "leave"]).optional(),
  })
  .strict()
  .describe("Who may decide this step's confirmation: roles or users, how many must approve (quorum), whether the run's requester may approve; a step may tighten its skill's policy, never loosen it");

/** The stricter of two lists of allowed principals: their intersection when both restrict. */
function narrower<T>(a: T[] | undefined, b: T[] | undefined): T[] | undefined {
  if (!a) return b;
  if (!b) return a;
  return a.filter((x) => b.includes(x));
}

/**
 * The policy that holds when a skill's policy meets a step's: every field at its stricter value.
 * A step that tries to loosen a field (a smaller quorum, allowRequester back to true, another
 * role) changes nothing about it.
 */
export function strictest(skill: ApprovalPolicy | undefined, step: ApprovalPolicy | undefined): ApprovalPolicy | undefined {
  if (!skill) return step;
  if (!step) return skill;
  const out: ApprovalPolicy = {};
  const roles = narrower(skill.roles, step.roles);
  const users = narrower(skill.users, step.users);
  if (roles) out.roles = roles;
  if (users) out.users = users;
  const quorum = Math.max(skill.quorum ?? 1, step.quorum ?? 1);
  if (quorum > 1) out.quorum = quorum;
  if (skill.allowRequester === false || step.allowRequester === false) out.allowRequester = false;
  const exp = [skill.expiresAfterMs, step.expiresAfterMs].filter((x): x is number => x !== undefined);
  if (exp.length) out.expiresAfterMs = Math.min(...exp);
  // rejecting on expiry is the stricter outcome
  if (skill.onExpiry || step.onExpiry) out.onExpiry = skill.onExpiry === "reject" || step.onExpiry === "reject" ? "reject" : "leave";
  return out;
}

export const quorumOf = (p: ApprovalPolicy | undefined) => p?.quorum ?? 1;

const sameActor = (a: Actor | undefined, b: Actor | undefined) => !!a && !!b && a.kind === b.kind && a.id === b.id;

/** Why this principal may not take this decision under the policy (undefined: it may). */
export function refusal(policy: ApprovalPolicy | undefined, who: Decider, requester: Actor | undefined, decision: string): ToolchainError | undefined {
  if (!policy) return undefined;
  const restricted = policy.roles !== undefined || policy.users !== undefined;
  if (restricted) {
    // only people match a policy that names roles or users; a personal key without roles has every role
    const isUser = who.by.kind === "user";
    const roles = isUser ? who.roles ?? ROLES : [];
    const byRole = policy.roles?.some((r) => roles.includes(r)) ?? false;
    const byUser = isUser && (policy.users?.includes(who.by.id) ?? false);
    if (!byRole && !byUser) {
      const wants = [policy.roles ? `roles ${policy.roles.join(", ")}` : "", policy.users ? `users ${policy.users.join(", ")}` : ""].filter(Boolean).join(" or ");
      return new ToolchainError(ErrorCode.NOT_ALLOWED_TO_DECIDE, `the step's approval policy lets only ${wants} decide; ${who.by.kind} ${who.by.id} is not one of them`, { details: { policy } });
    }
  }
  if (policy.allowRequester === false && decision === "approve" && sameActor(who.by, requester)) {
    return new ToolchainError(ErrorCode.REQUESTER_CANNOT_APPROVE, `the step's approval policy (allowRequester: false) does not let ${who.by.id}, who started the run, approve it`, { details: { policy } });
  }
  return undefined;
}
