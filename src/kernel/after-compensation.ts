/**
 * What follows a compensation: the pure decisions of the rollback walk (graphs/compensation/),
 * applied the same way in strict and best_effort mode.
 * - after one compensation attempt failed: retry it (per the step's policy), or give up;
 * - after a step's compensation finished (or could not start): record what, and whether the
 *   walk goes on, stops (the rest stay `pending`), or blocks for an operator's decision.
 */
import type { RollbackMode } from "../plan/schema.js";
import { decideRetry, type CompiledRetry } from "../plan/retry-policy.js";
import { ErrorCode, type StepError } from "./errors.js";

/** One compensation attempt's result; `final`: in doubt (a dead process claimed it), never repeated blindly. */
export type CompensationAttemptOutcome = { ok: true } | { ok: false; error: StepError; final?: boolean };

export type AfterCompensationAttempt =
  { kind: "done" } | { kind: "retry"; delayMs: number } | { kind: "give_up"; error: StepError };

export interface AfterCompensationAttemptInput {
  outcome: CompensationAttemptOutcome;
  attempt: number;
  /** Why the walk was told to stop (a cancel), once it was; undefined while it goes on. */
  stopped: StepError | undefined;
  retry: CompiledRetry;
  random: () => number;
}

export function afterCompensationAttempt(i: AfterCompensationAttemptInput): AfterCompensationAttempt {
  const o = i.outcome;
  if (o.ok) return { kind: "done" };
  if (o.final) return { kind: "give_up", error: o.error };
  if (i.stopped) return { kind: "give_up", error: o.error.code === ErrorCode.CANCELLED ? o.error : i.stopped };
  // compensations are retried per the step's policy (they must be idempotent: same key every time)
  const d = decideRetry(i.retry, { sideEffects: "none", idempotent: true }, o.error, i.attempt, i.random);
  return d.retry ? { kind: "retry", delayMs: d.delayMs } : { kind: "give_up", error: o.error };
}

/** How a step's compensation ended: every attempt made, or none possible (`not_compensable`). */
export type CompensationResult = { ok: true } | { ok: false; error: StepError } | { ok: false; notCompensable: true };

/** What the walk records for the step, and what it does next. */
export type AfterCompensation =
  | { kind: "rolled_back"; next: "continue" }
  /** strict stops: only reachable with acceptNoCompensation, nothing an operator could retry */
  | { kind: "not_compensable"; next: "continue" | "stop" }
  /** cancelled mid-rollback: this compensation did not finish, the rest stay untouched, no operator wait */
  | { kind: "cancelled"; next: "stop" }
  /** strict blocks: later steps stay untouched until an operator decides (retry / skip / stop) */
  | { kind: "failed"; next: "continue" | "block" };

export function afterCompensation(
  mode: RollbackMode,
  result: CompensationResult,
  /** the run's cancel reached the walk */
  stopped: boolean,
): AfterCompensation {
  if (result.ok) return { kind: "rolled_back", next: "continue" };
  if ("notCompensable" in result) return { kind: "not_compensable", next: mode === "strict" ? "stop" : "continue" };
  if (result.error.code === ErrorCode.CANCELLED && stopped) return { kind: "cancelled", next: "stop" };
  return { kind: "failed", next: mode === "strict" ? "block" : "continue" };
}
