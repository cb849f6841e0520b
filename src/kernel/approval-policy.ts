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
  /**
   * Set by `strictest` only (a plan cannot carry it: the schema refuses the key): further gates
   * of roles / users every decider must also pass, beside `roles` / `users`. Two policies that
   * each restrict who decides hold together only as a conjunction (a person holds several roles).
   */
  allOf?: WhoGate[];
}

/** One gate on who decides: a user with one of `roles`, or one of `users`. */
export interface WhoGate {
  roles?: Role[];
  users?: string[];
}

export const ApprovalPolicySchema = z
  .object({
    roles: z
      .array(z.enum(ROLES as [Role, ...Role[]]))
      .min(1)
      .max(4)
      .optional(),
    users: z.array(z.string().regex(USER_ID)).min(1).max(100).optional(),
    quorum: z.number().int().min(1).max(20).optional(),
    allowRequester: z.boolean().optional(),
    expiresAfterMs: z
      .number()
      .int()
      .min(1_000)
      .max(30 * 86_400_000)
      .optional(),
    onExpiry: z.enum(["reject", "leave"]).optional(),
  })
  .strict()
  .describe(
    "Who may decide this step's confirmation: roles or users, how many must approve (quorum), whether the run's requester may approve; a step may tighten its skill's policy, never loosen it",
  );

/** The policy as it is checked (strictest's output): every field, and `allOf` gates. */
export const EffectivePolicySchema = ApprovalPolicySchema.extend({
  allOf: z
    .array(
      z.object({
        roles: z.array(z.enum(ROLES as [Role, ...Role[]])).optional(),
        users: z.array(z.string()).optional(),
      }),
    )
    .optional()
    .describe("Further gates every decider must also pass (from a step's policy meeting its skill's)"),
});

/** The gates of who decides that a policy sets (none: anyone allowed to decide at all). */
function gatesOf(p: ApprovalPolicy): WhoGate[] {
  const own: WhoGate[] = p.roles !== undefined || p.users !== undefined ? [{ roles: p.roles, users: p.users }] : [];
  return [...own, ...(p.allOf ?? [])].map((g) => ({
    ...(g.roles !== undefined ? { roles: g.roles } : {}),
    ...(g.users !== undefined ? { users: g.users } : {}),
  }));
}

/**
 * Both sides' gates, each still required. Exact simplifications only: users-only gates intersect
 * (a user has one id); a roles-only gate implied by another (a subset of its roles) is dropped.
 * Roles never intersect: someone holding `approver` and `operator` passes `[approver]` and
 * `[operator]`, and `[]` would let nobody.
 */
function conjunction(gates: WhoGate[]): WhoGate[] {
  const usersOnly = gates.filter((g) => g.users && !g.roles);
  const rolesOnly = gates.filter((g) => g.roles && !g.users);
  const mixed = gates.filter((g) => g.roles && g.users);
  const out: WhoGate[] = [];
  if (usersOnly.length)
    out.push({ users: usersOnly.map((g) => g.users!).reduce((a, b) => a.filter((u) => b.includes(u))) });
  const subset = (a: Role[], b: Role[]) => a.every((r) => b.includes(r));
  rolesOnly.forEach((g, i) => {
    const implied = rolesOnly.some(
      (h, j) => j !== i && subset(h.roles!, g.roles!) && (!subset(g.roles!, h.roles!) || j < i),
    );
    if (!implied) out.push({ roles: g.roles });
  });
  return [...out, ...mixed];
}

/**
 * The policy that holds when a skill's policy meets a step's: every field at its stricter value.
 * A step that tries to loosen a field (a smaller quorum, allowRequester back to true, another
 * role) changes nothing about it.
 */
export function strictest(
  skill: ApprovalPolicy | undefined,
  step: ApprovalPolicy | undefined,
): ApprovalPolicy | undefined {
  if (!skill) return step;
  if (!step) return skill;
  const out: ApprovalPolicy = {};
  const [first, ...rest] = conjunction([...gatesOf(skill), ...gatesOf(step)]);
  if (first?.roles) out.roles = first.roles;
  if (first?.users) out.users = first.users;
  if (rest.length) out.allOf = rest;
  const quorum = Math.max(skill.quorum ?? 1, step.quorum ?? 1);
  if (quorum > 1) out.quorum = quorum;
  if (skill.allowRequester === false || step.allowRequester === false) out.allowRequester = false;
  const exp = [skill.expiresAfterMs, step.expiresAfterMs].filter((x): x is number => x !== undefined);
  if (exp.length) out.expiresAfterMs = Math.min(...exp);
  // rejecting on expiry is the stricter outcome; a side with an expiry and no onExpiry rejects
  // (the default), so a step's "leave" cannot soften its skill's expiry
  const effective = (p: ApprovalPolicy) => p.onExpiry ?? (p.expiresAfterMs !== undefined ? "reject" : undefined);
  const [a, b] = [effective(skill), effective(step)];
  if (a || b) out.onExpiry = a === "reject" || b === "reject" ? "reject" : "leave";
  return out;
}

/** Why nobody could ever decide under this policy (undefined: someone can). */
export function undecidable(policy: ApprovalPolicy | undefined): string | undefined {
  if (policy && gatesOf(policy).some((g) => g.users?.length === 0 && !g.roles))
    return "no user is allowed by both the step's and its skill's approval policy";
  return undefined;
}

export const quorumOf = (p: ApprovalPolicy | undefined) => p?.quorum ?? 1;

/**
 * Workspace default policies by workspace id (`"*"`: every workspace): the floor every
 * confirmation in the workspace stands on; a skill's and a step's policies only tighten it.
 */
export type ApprovalDefaults = Record<string, ApprovalPolicy>;

/** The default policy of a workspace: the `"*"` entry tightened by the workspace's own. */
export function workspaceDefault(defaults: ApprovalDefaults | undefined, workspaceId: string | undefined) {
  if (!defaults) return undefined;
  return strictest(defaults["*"], workspaceId !== undefined ? defaults[workspaceId] : undefined);
}

/** `TOOLCHAIN_APPROVAL_DEFAULTS`: a JSON object of workspace id (or "*") to policy; errors name the field. */
export function parseApprovalDefaults(raw: string | undefined, where = "TOOLCHAIN_APPROVAL_DEFAULTS") {
  if (raw === undefined || raw.trim() === "") return undefined;
  let json: unknown;
  try {
    json = JSON.parse(raw);
  } catch (e) {
    throw new TypeError(`Expected ${where} to be JSON, got ${(e as Error).message}`);
  }
  const parsed = z.record(z.string().min(1).max(200), ApprovalPolicySchema).safeParse(json);
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    throw new TypeError(
      `Expected ${where}${i.path.length ? "." + i.path.join(".") : ""} to be ${i.path.length ? "valid" : 'an object of workspace id (or "*") to approval policy'}: ${i.message}`,
    );
  }
  return parsed.data as ApprovalDefaults;
}

/** What a wait's policy holds for its expiry, from when it began waiting (undefined: it never expires). */
export function deadlineOf(
  policy: ApprovalPolicy | undefined,
  waitingSinceMs: number,
): { expiresAt: string; onExpiry: "reject" | "leave" } | undefined {
  if (!policy?.expiresAfterMs) return undefined;
  return {
    expiresAt: new Date(waitingSinceMs + policy.expiresAfterMs).toISOString(),
    onExpiry: policy.onExpiry ?? "reject",
  };
}

/** The parts of a plan and of a skill a policy is read from (structural: the kernel knows neither module). */
interface PolicySources {
  skillOf(name: string): { approval?: ApprovalPolicy } | undefined;
  plan: { steps: readonly { stepId: string; skillName: string; approval?: ApprovalPolicy }[] };
  /** The workspace default (workspaceDefault). */
  floor?: ApprovalPolicy;
}

/**
 * The policy a wait is under: the workspace default, tightened by its skill's (the fallback
 * skill's when it waits to run that), tightened by the step's. Rollback (compensation) decisions
 * have none: they are an operator's call on a run already failing.
 */
export function policyOfWait(
  src: PolicySources,
  pending: { stepId: string; skillName: string; kind?: string },
): ApprovalPolicy | undefined {
  if (pending.kind === "compensation") return undefined;
  const step = src.plan.steps.find((s) => s.stepId === pending.stepId);
  const skill = src.skillOf(pending.skillName) ?? (step ? src.skillOf(step.skillName) : undefined);
  return strictest(src.floor, strictest(skill?.approval, step?.approval));
}

const sameActor = (a: Actor | undefined, b: Actor | undefined) => !!a && !!b && a.kind === b.kind && a.id === b.id;

/** Why this principal may not take this decision under the policy (undefined: it may). */
export function refusal(
  policy: ApprovalPolicy | undefined,
  who: Decider,
  requester: Actor | undefined,
  decision: string,
): ToolchainError | undefined {
  if (!policy) return undefined;
  // only people match a gate that names roles or users; a personal key without roles has every role
  const isUser = who.by.kind === "user";
  const roles = isUser ? (who.roles ?? ROLES) : [];
  for (const gate of gatesOf(policy)) {
    const byRole = gate.roles?.some((r) => roles.includes(r)) ?? false;
    const byUser = isUser && (gate.users?.includes(who.by.id) ?? false);
    if (byRole || byUser) continue;
    const wants = [
      gate.roles ? `roles ${gate.roles.join(", ")}` : "",
      gate.users ? `users ${gate.users.join(", ")}` : "",
    ]
      .filter(Boolean)
      .join(" or ");
    return new ToolchainError(
      ErrorCode.NOT_ALLOWED_TO_DECIDE,
      gate.users?.length === 0 && !gate.roles
        ? `the step's approval policy lets nobody decide: ${undecidable(policy)}`
        : `the step's approval policy lets only ${wants} decide; ${who.by.kind} ${who.by.id} is not one of them`,
      { details: { policy } },
    );
  }
  if (policy.allowRequester === false && decision === "approve" && sameActor(who.by, requester)) {
    return new ToolchainError(
      ErrorCode.REQUESTER_CANNOT_APPROVE,
      `the step's approval policy (allowRequester: false) does not let ${who.by.id}, who started the run, approve it`,
      { details: { policy } },
    );
  }
  return undefined;
}
