/**
 * How events change the stored run and step rows: pure, shared by both stores, so the audit
 * tables move in exactly the order events happen.
 */
import { compensationPending, type PendingConfirmation } from "../kernel/pending.js";
import type { RunEvent } from "../kernel/events.js";
import { runStatusAfter, STEP_STATUS_AFTER, stepsResetBy } from "../kernel/projection.js";
import type { RunStatus, StepStatus } from "../kernel/status.js";

export interface StepPatch {
  stepId: string;
  status?: StepStatus;
  attempts?: number;
  errorCode?: string | null;
  errorMessage?: string | null;
  startedAt?: string;
  finishedAt?: string;
  rollbackStatus?: string;
}

export interface Projection {
  runStatus?: RunStatus;
  pending: PendingConfirmation[];
  steps: StepPatch[];
}

const FINISHING = new Set(["step_completed", "step_failed", "step_skipped", "step_cancelled"]);

export function project(events: readonly RunEvent[], pendingBefore: readonly PendingConfirmation[]): Projection {
  const pending = new Map(pendingBefore.map((p) => [p.stepId, p]));
  const steps = new Map<string, StepPatch>();
  let runStatus: RunStatus | undefined;
  for (const e of events) {
    runStatus = runStatusAfter(e, runStatus) ?? runStatus;
    for (const id of stepsResetBy(e)) {
      steps.set(id, { ...(steps.get(id) ?? { stepId: id }), status: "pending" });
      pending.delete(id);
    }
    if (!e.stepId) continue;
    const p = steps.get(e.stepId) ?? { stepId: e.stepId };
    const st = STEP_STATUS_AFTER[e.type];
    if (st) p.status = st;
    if (e.type === "step_started") {
      p.attempts = Number(e.data.attempt ?? 1);
      p.startedAt ??= e.at;
    }
    if (FINISHING.has(e.type)) p.finishedAt = e.at;
    const err = e.data.error as { code?: string; message?: string } | undefined;
    if (err && (e.type === "step_failed" || e.type === "step_retrying")) {
      p.errorCode = err.code ?? null;
      p.errorMessage = err.message ?? null;
    }
    if (e.type === "step_rolled_back") p.rollbackStatus = "rolled_back";
    if (e.type === "step_rollback_failed")
      p.rollbackStatus =
        (e.data.error as { code?: string } | undefined)?.code === "NOT_COMPENSABLE"
          ? "not_compensable"
          : "rollback_failed";
    steps.set(e.stepId, p);
    if (e.type === "rollback_waiting_decision") {
      pending.set(
        e.stepId,
        compensationPending(String(e.data.skillName ?? ""), {
          stepId: e.stepId,
          round: Number(e.data.round ?? 0),
          error: e.data.error,
        }),
      );
    } else if (e.type === "step_waiting_confirmation") {
      pending.set(e.stepId, {
        stepId: e.stepId,
        skillName: String(e.data.skillName ?? ""),
        arguments: e.data.arguments ?? null,
        preview: e.data.preview ?? null,
        ...(e.data.round !== undefined ? { round: Number(e.data.round) } : {}),
        ...(e.data.inDoubt ? { inDoubt: true, kind: "in_doubt" } : { kind: "confirmation" }),
        ...(e.data.fallback ? { fallback: true } : {}),
        ...(typeof e.data.expiresAt === "string"
          ? { expiresAt: e.data.expiresAt, onExpiry: e.data.onExpiry === "leave" ? "leave" : "reject" }
          : {}),
      } as PendingConfirmation);
    } else if (
      e.type === "step_confirmed" ||
      e.type === "step_failed" ||
      e.type === "step_cancelled" ||
      e.type === "step_completed"
    ) {
      pending.delete(e.stepId);
    }
  }
  return { runStatus, pending: [...pending.values()], steps: [...steps.values()] };
}

/**
 * A drive's final pending confirmations (from graph state), each keeping the approval deadline the
 * row already holds for the same (step, round): the deadline of the wait's first event. (The
 * Postgres store does the same in SQL.)
 */
export function keepDeadlines(
  next: readonly PendingConfirmation[],
  prev: readonly PendingConfirmation[],
): PendingConfirmation[] {
  return next.map((p) => {
    const old = prev.find((q) => q.expiresAt && q.stepId === p.stepId && (q.round ?? 0) === (p.round ?? 0));
    return old ? { ...p, expiresAt: old.expiresAt, onExpiry: old.onExpiry ?? "reject" } : p;
  });
}
