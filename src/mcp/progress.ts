/**
 * Pure: a run's events → MCP progress notifications. Each step counts twice (started, finished),
 * so `total` is 2 × steps and `progress` only grows (the protocol requires it): a retry or a
 * second start of a step after a resume is not reported again.
 */
import type { RunEvent } from "../kernel/events.js";
import type { StepStatus } from "../kernel/status.js";

export interface ProgressUpdate {
  progress: number;
  total: number;
  message: string;
}

const FINISHED: Readonly<Record<string, string>> = {
  step_completed: "completed",
  step_failed: "failed",
  step_skipped: "skipped",
  step_cancelled: "cancelled",
};

const NOT_STARTED: ReadonlySet<StepStatus> = new Set<StepStatus>(["pending", "waiting_confirmation"]);
const DONE: ReadonlySet<StepStatus> = new Set<StepStatus>([
  "completed",
  "failed",
  "skipped",
  "cancelled",
  "rolled_back",
  "rollback_failed",
]);

export class ProgressTracker {
  private readonly started = new Set<string>();
  private readonly finished = new Set<string>();
  private last = 0;
  private total: number;

  /** `steps`: the run's steps as they are now (a tool call that continues a run starts from them). */
  constructor(steps: readonly { stepId: string; status: StepStatus }[]) {
    this.total = 2 * steps.length;
    for (const s of steps) {
      if (!NOT_STARTED.has(s.status)) this.started.add(s.stepId);
      if (DONE.has(s.status)) this.finished.add(s.stepId);
    }
    this.last = this.value;
  }

  private get value(): number {
    return this.started.size + this.finished.size;
  }

  /** The notification this event deserves, if it moved the run forward. */
  next(e: RunEvent): ProgressUpdate | undefined {
    // a run started from a request learns its steps when the planner has written them
    if (e.type === "planning_completed" && typeof e.data.steps === "number") this.total = 2 * e.data.steps;
    if (!e.stepId) return undefined;
    let message: string | undefined;
    if (e.type === "step_started") {
      this.started.add(e.stepId);
      message = `step ${e.stepId} started`;
    } else if (e.type in FINISHED) {
      this.started.add(e.stepId);
      this.finished.add(e.stepId);
      const code = (e.data.error as { code?: string } | undefined)?.code;
      message = `step ${e.stepId} ${FINISHED[e.type]}${code ? ` (${code})` : ""}`;
    }
    if (message === undefined || this.value <= this.last) return undefined;
    this.last = this.value;
    return { progress: this.last, total: this.total, message };
  }
}
