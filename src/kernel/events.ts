/**
 * Lifecycle events: one shape for the custom stream, the event log, SSE and the CLI.
 */
export const EventType = {
  planning_started: "planning_started",
  planning_completed: "planning_completed",
  /** no plan could be written for the run's request (the run fails with PLANNING_FAILED) */
  planning_failed: "planning_failed",
  step_started: "step_started",
  step_completed: "step_completed",
  /** the step's own skill failed for good and its fallback skill (data.skillName) starts attempt data.attempt */
  step_fallback_started: "step_fallback_started",
  step_retrying: "step_retrying",
  /** the step waits for a serial key or resource held by other steps (data.waitingFor); it has not started */
  step_waiting_for_limit: "step_waiting_for_limit",
  step_waiting_confirmation: "step_waiting_confirmation",
  step_confirmed: "step_confirmed",
  step_failed: "step_failed",
  step_skipped: "step_skipped",
  step_cancelled: "step_cancelled",
  rollback_started: "rollback_started",
  step_rolled_back: "step_rolled_back",
  step_rollback_failed: "step_rollback_failed",
  rollback_completed: "rollback_completed",
  /** strict rollback stopped at a failed compensation: an operator decides (retry / skip / stop) */
  rollback_waiting_decision: "rollback_waiting_decision",
  run_waiting_confirmation: "run_waiting_confirmation",
  /** a cancel was asked for: who asked (`by`), through which surface (`via`), why (written by the runtime when it records the request) */
  run_cancel_requested: "run_cancel_requested",
  /** one approval of a quorum that is not complete yet (`by`, `via`, how many are still needed) */
  approval_given: "approval_given",
  /** a wait outlived its approval policy's expiresAfterMs: rejected by the runtime (`outcome: "rejected"`, `by` the expiry principal) or left waiting (`"left"`) */
  approval_expired: "approval_expired",
  /** a resume value that does not parse or answers no waiting step (LangGraph Studio, the SDK): the interrupt is raised again with the error */
  resume_rejected: "resume_rejected",
  /** an operator redrove a failed run (`by`, `via`, the `steps` that run again, `overrides` per step, `n`): those steps are pending again */
  run_redriven: "run_redriven",
  /** this process lacks a compatible version of a pinned skill (`skillVersion`: skill, pinned, available) and left the run; the first one's `at` starts the grace period */
  run_waiting_for_version: "run_waiting_for_version",
  /** `runs migrate` carried a waiting step's arguments to another skill version (`skillName`, `from`, `to`, `changes`, `by`, `via`) */
  step_arguments_migrated: "step_arguments_migrated",
  run_completed: "run_completed",
  run_failed: "run_failed",
} as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

/** As emitted by a graph node, before the event log numbers it. */
export interface EmittedEvent {
  type: EventType;
  stepId?: string;
  at: string;
  data: Record<string, unknown>;
  /**
   * Identity of the event: a node that re-executes after a resume or a crash emits the same
   * events again for work it replays from the checkpoint; the log keeps the first of each key.
   */
  key: string;
}

export interface RunEvent extends EmittedEvent {
  runId: string;
  /** Per-run, strictly increasing from 1. */
  seq: number;
}

/** Marker so the runtime can tell our events from other custom-stream chunks. */
export const EVENT_TAG = "toolchain.event" as const;
export interface TaggedEvent {
  [EVENT_TAG]: EmittedEvent;
}
export function isTaggedEvent(x: unknown): x is TaggedEvent {
  return typeof x === "object" && x !== null && EVENT_TAG in x;
}

/** An event's key: after a redrive its events are new facts, not repeats of the first generation's. */
export function eventKey(
  type: string,
  stepId: string | undefined,
  suffix: string | undefined,
  generation: number,
): string {
  const base = [type, stepId ?? "", suffix ?? ""].join(":");
  return generation ? `${base}@redrive${generation}` : base;
}
