/**
 * Retry policy compiled once per step, and the pure decision "may this failure be retried?".
 */
import { DEFAULT_RETRYABLE, type ErrorCode, type StepError } from "../kernel/errors.js";
import { MAX_BACKOFF_MS, MAX_TIMER_MS, RetrySpecSchema, type Backoff, type RetrySpec } from "./schema.js";
import type { Skill } from "../skills/contract.js";
import { hasSideEffects } from "../skills/contract.js";

export interface CompiledRetry {
  maxAttempts: number;
  backoff: Backoff;
  retryOn: ReadonlySet<ErrorCode>;
}

export const DEFAULT_RETRY: RetrySpec = RetrySpecSchema.parse({});

export function compileRetry(spec: RetrySpec | undefined): CompiledRetry {
  const s = spec ?? DEFAULT_RETRY;
  return {
    maxAttempts: s.maxAttempts,
    backoff: s.backoff,
    retryOn: s.retryOn ? new Set(s.retryOn) : DEFAULT_RETRYABLE,
  };
}

export type RetryDecision =
  | { retry: true; delayMs: number }
  | { retry: false; reason: "attempts_exhausted" | "not_retryable" | "unsafe_side_effect" };

/**
 * A failure is retried only when its code is retryable under the policy, attempts remain, and
 * repeating is safe: a side-effecting, non-idempotent skill is retried only when the error says
 * the effect did not start (`effectStarted: false`), e.g. a refusal before the call went out.
 */
export function decideRetry(
  policy: CompiledRetry,
  skill: Pick<Skill, "sideEffects" | "idempotent">,
  error: StepError,
  attempt: number,
  random: () => number = Math.random,
): RetryDecision {
  if (!policy.retryOn.has(error.code)) return { retry: false, reason: "not_retryable" };
  if (attempt >= policy.maxAttempts) return { retry: false, reason: "attempts_exhausted" };
  if (hasSideEffects(skill) && !skill.idempotent && error.effectStarted !== false) {
    return { retry: false, reason: "unsafe_side_effect" };
  }
  const delay = backoffDelay(policy.backoff, attempt, random);
  // a skill's retryAfterMs is not bounded by the plan schema: keep it within what a timer can hold
  return { retry: true, delayMs: Math.min(Math.max(delay, error.retryAfterMs ?? 0), MAX_TIMER_MS) };
}

/**
 * Delay before attempt `attempt + 1`. Jitter is "full jitter" over [delay/2, delay]. Without
 * `maxMs`, exponential growth stops at MAX_BACKOFF_MS (1 h), the bound the plan's fields have.
 */
export function backoffDelay(b: Backoff, attempt: number, random: () => number = Math.random): number {
  const base = b.kind === "fixed" ? b.initialMs : b.initialMs * 2 ** (attempt - 1);
  const capped = Math.min(base, b.maxMs ?? MAX_BACKOFF_MS);
  if (!b.jitter) return capped;
  return Math.round(capped / 2 + (random() * capped) / 2);
}
