/**
 * Event → status, declared once: the run and step status an event moves to. The run store (the
 * truth in the database), the live view of an active run, the CLI and the console all fold events
 * through these, so they cannot disagree on what, say, `planning_started` means
 * (test/status-projection.test.ts fails if one of them drifts).
 */
import type { EventType, RunEvent } from "./events.js";
import { TERMINAL_RUN, type RunStatus, type StepStatus } from "./status.js";

/** The step status an event moves its step to. */
export const STEP_STATUS_AFTER: Partial<Record<EventType, StepStatus>> = {
  step_started: "running",
  step_fallback_started: "running",
  step_retrying: "retrying",
  step_waiting_confirmation: "waiting_confirmation",
  step_completed: "completed",
  step_failed: "failed",
  step_skipped: "skipped",
  step_cancelled: "cancelled",
  step_rolled_back: "rolled_back",
  step_rollback_failed: "rollback_failed",
};

/** Run statuses a step starting (or a decision being applied) moves to running. */
const RESUMES: ReadonlySet<RunStatus | undefined> = new Set<RunStatus | undefined>([
  undefined,
  "queued",
  "planning",
  "waiting_confirmation",
]);

/**
 * The run status after `e`, given the status before it (`undefined`: not known to the caller, as
 * for the store folding one batch of events); `undefined` when the event says nothing new.
 */
export function runStatusAfter(
  e: Pick<RunEvent, "type" | "data">,
  before: RunStatus | undefined,
): RunStatus | undefined {
  switch (e.type) {
    case "planning_started":
      return "planning";
    case "planning_completed":
      return "running";
    case "run_waiting_confirmation":
      return "waiting_confirmation";
    case "run_completed":
    case "run_failed": {
      const s = e.data.status;
      return typeof s === "string" && TERMINAL_RUN.has(s as RunStatus)
        ? (s as RunStatus)
        : e.type === "run_completed"
          ? "completed"
          : "failed";
    }
    case "run_redriven":
      return "running";
    case "rollback_waiting_decision":
      return "rollback_failed";
    case "step_started":
    case "step_fallback_started":
    case "step_confirmed":
      return RESUMES.has(before) ? "running" : undefined;
    default:
      return undefined;
  }
}

/** The steps an event sets back to `pending` (a redrive's), besides its own `stepId`. */
export function stepsResetBy(e: Pick<RunEvent, "type" | "data">): string[] {
  if (e.type !== "run_redriven" || !Array.isArray(e.data.steps)) return [];
  return e.data.steps.filter((s): s is string => typeof s === "string");
}

/** `before` folded over `events` (unchanged when none of them moves the run). */
export function foldRunStatus(
  events: readonly Pick<RunEvent, "type" | "data">[],
  before: RunStatus | undefined,
): RunStatus | undefined {
  let s = before;
  for (const e of events) s = runStatusAfter(e, s) ?? s;
  return s;
}
