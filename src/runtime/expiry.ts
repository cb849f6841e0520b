/**
 * Approval expiry as a durable timer. A wait under a policy with `expiresAfterMs` carries its
 * deadline in its `step_waiting_confirmation` event, so the run row holds it
 * (`pendingConfirmations[].expiresAt`); every worker loop, in any process, sweeps the waits past
 * their deadline. Nothing is kept in memory: a deadline that passed while every process was down is
 * applied by the first worker up. Each step of a sweep is idempotent, so two processes sweeping at
 * once, or one dying halfway, never double anything: the audit event is deduplicated by key, the
 * reject is a decision (one per step and round), the handled mark is one row per wait.
 */
import { EXPIRY_ACTING } from "../kernel/actor.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { EventType } from "../kernel/events.js";
import type { ExpiredWait, ExpiryOutcome, RunStore } from "../store/run-store.js";

export interface ExpiryDeps {
  store: RunStore;
  now(): number;
  /** Reject the wait as the expiry principal (Runtime's one decision path, without the approval policy's checks). */
  reject(w: ExpiredWait, comment: string): Promise<unknown>;
}

export interface ExpiryResult extends ExpiredWait {
  outcome: ExpiryOutcome;
}

/** Apply every expired wait found (at most `limit`), soonest deadline first. */
export async function sweepExpired(deps: ExpiryDeps, limit = 50): Promise<ExpiryResult[]> {
  const due = await deps.store.expiredWaits(new Date(deps.now()), limit);
  const out: ExpiryResult[] = [];
  for (const w of due) out.push({ ...w, outcome: await expire(deps, w) });
  return out;
}

async function expire(deps: ExpiryDeps, w: ExpiredWait): Promise<ExpiryOutcome> {
  const { store } = deps;
  // a decision recorded before the deadline was seen (a person, or a quorum completing) wins
  if (await store.getDecision(w.runId, w.stepId, w.round)) {
    await store.markExpiryHandled(w.runId, w.stepId, w.round, "decided");
    return "decided";
  }
  const outcome: ExpiryOutcome = w.onExpiry === "leave" ? "left" : "rejected";
  const at = new Date(deps.now()).toISOString();
  // the audit event first: a crash after it leaves the wait unhandled, and the next sweep repeats
  // every step (the event is kept once by its key)
  await store.append(w.runId, [
    {
      type: EventType.approval_expired,
      at,
      // no event stepId: the expiry itself does not move the step (its step_confirmed does)
      data: {
        stepId: w.stepId,
        round: w.round,
        expiresAt: w.expiresAt,
        onExpiry: w.onExpiry,
        outcome,
        by: EXPIRY_ACTING.by,
        via: EXPIRY_ACTING.via,
      },
      key: `approval_expired:${w.stepId}:${w.round}`,
    },
  ]);
  if (outcome === "rejected") {
    try {
      await deps.reject(w, `approval expired at ${w.expiresAt}`);
    } catch (e) {
      // decided (or no longer waiting) between our look and the reject: the decision stands
      if (!(e instanceof ToolchainError && e.code === ErrorCode.CONFIRMATION_NOT_PENDING)) throw e;
      await store.markExpiryHandled(w.runId, w.stepId, w.round, "decided");
      return "decided";
    }
  }
  await store.markExpiryHandled(w.runId, w.stepId, w.round, outcome);
  return outcome;
}
