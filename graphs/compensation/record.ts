/**
 * What the walk records: the operator's answer to a blocked strict rollback, each step's
 * compensation outcome (its record and its event), the block for an operator, the walk's end.
 */
import { EventType } from "../../src/kernel/events.js";
import type { AfterCompensation } from "../../src/kernel/after-compensation.js";
import type { StepError } from "../../src/kernel/errors.js";
import { finishRun } from "../finish.js";
import type { RollbackAction, RunUpdate, StepRecord } from "../state.js";
import type { Walk } from "./walk.js";

/** A step still to be undone (or to be retried after an operator said so). */
export function needsWork(r: StepRecord): boolean {
  return r.status === "completed" && (r.rollback === undefined || r.rollback === "pending");
}

/** The operator's answer as a confirmation decision (the audit trail's vocabulary). */
const ANSWER_DECISION: Record<RollbackAction, "approve" | "skip" | "reject"> = {
  retry: "approve",
  skip: "skip",
  stop: "reject",
};

/**
 * Apply the operator's answer to the block this walk resumes from, if there is one: retry puts
 * the step back to be undone, skip leaves it undone (noted), stop ends the walk. Returns whether
 * the walk is stopped.
 */
export function applyAnswer(w: Walk): boolean {
  const block = w.state.rollbackBlocked;
  const answer = block && w.state.rollbackDecision?.stepId === block.stepId ? w.state.rollbackDecision : undefined;
  const decision = answer?.action;
  if (!block || !answer || !decision) return false;
  w.emit(
    EventType.step_confirmed,
    block.stepId,
    {
      decision: ANSWER_DECISION[decision],
      kind: "compensation",
      ...(answer.comment ? { comment: answer.comment } : {}),
      ...(answer.by ? { by: answer.by } : {}),
      ...(answer.via ? { via: answer.via } : {}),
    },
    `${block.round}`,
  );
  if (decision === "retry") w.set(block.stepId, { status: "completed", rollback: "pending" });
  else if (decision === "skip")
    w.set(block.stepId, { rollbackError: { ...block.error, message: `${block.error.message} (skipped by operator)` } });
  else return true;
  return false;
}

/** Record a step's compensation outcome: its record and its event. */
export function recordOutcome(w: Walk, id: string, after: AfterCompensation, error: StepError | undefined): void {
  if (after.kind === "not_compensable") {
    w.set(id, { rollback: "not_compensable", rollbackError: error });
    w.emit(EventType.step_rollback_failed, id, { error });
    return;
  }
  const attempts = w.rec(id).rollbackAttempts;
  if (after.kind === "rolled_back") {
    w.set(id, { status: "rolled_back", rollback: "rolled_back", rollbackError: undefined });
    w.emit(EventType.step_rolled_back, id, { attempts }, `${attempts}`);
    return;
  }
  w.set(id, { status: "rollback_failed", rollback: "rollback_failed", rollbackError: error });
  w.emit(
    EventType.step_rollback_failed,
    id,
    { error, attempts, ...(after.kind === "cancelled" ? { cancelled: true } : {}) },
    `${attempts}`,
  );
}

/**
 * Strict: stop at a failed compensation; later steps stay untouched until an operator decides
 * (the rollback_approval node asks).
 */
export function block(w: Walk, id: string, later: readonly string[], error: StepError, skillName: string): RunUpdate {
  for (const l of later) if (needsWork(w.rec(l))) w.set(l, { rollback: "pending" });
  const blocked = { stepId: id, round: 100 + w.rec(id).rollbackAttempts!, error };
  w.emit(EventType.rollback_waiting_decision, id, { round: blocked.round, error, skillName }, `${blocked.round}`);
  return {
    steps: w.touched,
    rollbackBlocked: blocked,
    rollbackDecision: null,
    status: "rollback_failed",
    updatedAt: new Date(w.env.now()).toISOString(),
  };
}

/** The walk's end: what is left undone, counted; the run's end. */
export function finish(w: Walk, stopped: boolean, cancelled: boolean): RunUpdate {
  const failures = Object.values({ ...w.state.steps, ...w.touched }).filter(
    (x) => x.rollback === "rollback_failed" || x.rollback === "not_compensable" || x.rollback === "pending",
  ).length;
  w.emit(EventType.rollback_completed, undefined, {
    mode: w.mode,
    ok: failures === 0,
    failures,
    stopped,
    ...(cancelled ? { cancelled: true } : {}),
  });
  // the walk is over: the run ends in this superstep (graphs/finish.ts)
  return finishRun(w.state, { steps: w.touched, rollbackBlocked: null, rollbackDecision: null }, w.emit, w.env);
}
