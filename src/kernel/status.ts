/**
 * The status vocabulary shared by the kernel, events, the API and the database.
 * Transitions are checked: an illegal one is a bug and throws.
 */
export const StepStatus = {
  pending: "pending",
  running: "running",
  retrying: "retrying",
  waiting_confirmation: "waiting_confirmation",
  completed: "completed",
  failed: "failed",
  skipped: "skipped",
  cancelled: "cancelled",
  rolled_back: "rolled_back",
  rollback_failed: "rollback_failed",
} as const;
export type StepStatus = (typeof StepStatus)[keyof typeof StepStatus];

export const RunStatus = {
  queued: "queued",
  planning: "planning",
  running: "running",
  waiting_confirmation: "waiting_confirmation",
  completed: "completed",
  failed: "failed",
  cancelled: "cancelled",
  rolled_back: "rolled_back",
  rollback_failed: "rollback_failed",
} as const;
export type RunStatus = (typeof RunStatus)[keyof typeof RunStatus];

/** Per-step rollback account (issue: compensation). */
export const RollbackStatus = {
  not_needed: "not_needed",
  pending: "pending",
  rolled_back: "rolled_back",
  rollback_failed: "rollback_failed",
  not_compensable: "not_compensable",
} as const;
export type RollbackStatus = (typeof RollbackStatus)[keyof typeof RollbackStatus];

export const TERMINAL_STEP: ReadonlySet<StepStatus> = new Set<StepStatus>([
  "completed",
  "failed",
  "skipped",
  "cancelled",
  "rolled_back",
  "rollback_failed",
]);
export const TERMINAL_RUN: ReadonlySet<RunStatus> = new Set<RunStatus>([
  "completed",
  "failed",
  "cancelled",
  "rolled_back",
  "rollback_failed",
]);

/** Statuses a run can be redriven from (graphs/redrive.ts checks its checkpoint, which is the truth). */
export const REDRIVABLE_RUN: ReadonlySet<RunStatus> = new Set<RunStatus>(["failed", "rolled_back"]);

const STEP_TRANSITIONS: Record<StepStatus, readonly StepStatus[]> = {
  pending: ["running", "waiting_confirmation", "skipped", "cancelled", "failed"],
  // completed: an approver marked a step in doubt as done
  waiting_confirmation: ["running", "failed", "cancelled", "skipped", "completed"],
  running: ["completed", "failed", "retrying", "cancelled", "waiting_confirmation"],
  retrying: ["running", "failed", "cancelled"],
  completed: ["rolled_back", "rollback_failed"],
  // completed: an operator retries a failed compensation in strict mode
  rollback_failed: ["rolled_back", "completed"],
  failed: [],
  skipped: [],
  cancelled: [],
  rolled_back: [],
};

export class IllegalTransitionError extends Error {
  constructor(
    readonly subject: string,
    readonly from: string,
    readonly to: string,
  ) {
    super(`illegal transition for ${subject}: ${from} -> ${to}`);
    this.name = "IllegalTransitionError";
  }
}

export function assertStepTransition(stepId: string, from: StepStatus, to: StepStatus): void {
  if (from === to) return;
  if (!STEP_TRANSITIONS[from].includes(to)) throw new IllegalTransitionError(`step ${stepId}`, from, to);
}
