/**
 * What happens after one attempt of a skill: the pure decision the scheduler applies. One function
 * for the step's own skill and for its fallback skill, so a rule (never retry a non-idempotent
 * effect, a fallback never falls back, nothing new after a halt) holds on both.
 */
import type { Skill } from "../skills/contract.js";
import { ErrorCode, type StepError } from "./errors.js";
import { decideRetry, type CompiledRetry } from "../plan/retry-policy.js";

/** What ran: the step's own skill, or the fallback skill after the step's skill failed for good. */
export type Unit = "step" | "fallback";

export type AttemptOutcome =
  { ok: true; output: unknown } | { ok: false; inDoubt: true } | { ok: false; error: StepError };

export type AfterAttempt =
  | { kind: "complete" }
  /** The attempt's process died before its result was saved: ask the skill, else a person. */
  | { kind: "reconcile" }
  /** The run halted (cancel, fail_fast, deadline) and this attempt was stopped by it. */
  | { kind: "cancelled" }
  | { kind: "retry"; delayMs: number }
  /** Complete with the plan's fallback value (not an effect: nothing to compensate). */
  | { kind: "fallback_value"; retrySuppressed?: RetrySuppressed }
  /** Run the fallback skill (through the same attempt path: confirmation, limits, intents). */
  | { kind: "fallback_skill"; retrySuppressed?: RetrySuppressed }
  | { kind: "fail"; retrySuppressed?: RetrySuppressed };

/** Why a failure that looked retryable was not retried. */
export type RetrySuppressed = "non_idempotent_side_effect";

export interface AfterAttemptInput {
  unit: Unit;
  outcome: AttemptOutcome;
  attempt: number;
  halted: boolean;
  retry: CompiledRetry;
  skill: Pick<Skill, "sideEffects" | "idempotent">;
  fallback: "value" | "skill" | undefined;
  random: () => number;
}

export function afterAttempt(i: AfterAttemptInput): AfterAttempt {
  const o = i.outcome;
  if (o.ok) return { kind: "complete" };
  if ("inDoubt" in o) return { kind: "reconcile" };
  if (i.halted && (o.error.code === ErrorCode.CANCELLED || o.error.code === ErrorCode.DEADLINE_EXCEEDED))
    return { kind: "cancelled" };
  // a fallback skill is tried once per approval: its own failure fails the step
  if (i.unit === "fallback") return { kind: "fail" };
  const d = decideRetry(i.retry, i.skill, o.error, i.attempt, i.random);
  if (d.retry && !i.halted) return { kind: "retry", delayMs: d.delayMs };
  const retrySuppressed =
    !d.retry && d.reason === "unsafe_side_effect" ? ("non_idempotent_side_effect" as const) : undefined;
  const extra = retrySuppressed ? { retrySuppressed } : {};
  if (i.fallback && !i.halted) return { kind: i.fallback === "value" ? "fallback_value" : "fallback_skill", ...extra };
  return { kind: "fail", ...extra };
}
