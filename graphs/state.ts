/**
 * The run's graph state: what the checkpointer stores for every run.
 */
import { Annotation } from "@langchain/langgraph";
import type { Actor, Via } from "../src/kernel/actor.js";
import type { StepError } from "../src/kernel/errors.js";
import type { RollbackStatus, RunStatus, StepStatus } from "../src/kernel/status.js";
import type { Admission } from "../src/plan/admission.js";
import type { ToolChainPlan } from "../src/plan/schema.js";
import type { PlannerInfo, PlanWarning, TokenUsage } from "../src/planner/index.js";

export interface StepRecord {
  status: StepStatus;
  attempts: number;
  input?: unknown;
  output?: unknown;
  error?: StepError;
  preview?: unknown;
  startedAt?: string;
  finishedAt?: string;
  /** Output came from the step's fallback, not from its skill. */
  usedFallback?: boolean;
  /** Why a retryable-looking failure was not retried. */
  retrySuppressed?: string;
  /** Arguments as approved by a human (possibly edited). */
  approvedArguments?: Record<string, unknown>;
  /** Which wait for a decision this is (0 before the first attempt; n after attempt n was in doubt). */
  waitRound?: number;
  /** Waiting because the step's outcome after a crash is unknown (decisions: retry / mark_done / fail). */
  inDoubt?: boolean;
  rollback?: RollbackStatus;
  rollbackError?: StepError;
  /** Compensation attempts so far (all rounds). */
  rollbackAttempts?: number;
  /** Attempts of the step's fallback skill so far. */
  fallbackAttempts?: number;
  /** The fallback skill's resolved arguments (for its reconcile). */
  fallbackInput?: unknown;
  /** Waiting because fallback attempt n is in doubt (approve = retry the fallback). */
  fallbackInDoubt?: number;
  /**
   * The step's own skill failed for good with this error and its fallback skill is what runs (or
   * waits for confirmation) now. Set from the moment the fallback phase begins.
   */
  fallbackOf?: StepError;
  /** Arguments of the fallback skill as approved by a person (possibly edited). */
  fallbackApprovedArguments?: Record<string, unknown>;
}

/** Strict rollback stopped at a failed compensation; an operator decides what happens next. */
export interface RollbackBlock {
  stepId: string;
  round: number;
  error: StepError;
}
export type RollbackAction = "retry" | "skip" | "stop";

export type { Decision } from "../src/kernel/decision.js";
import type { Decision } from "../src/kernel/decision.js";

/** Which planner wrote the run's plan (absent when the caller gave the plan). */
export interface PlanningRecord extends PlannerInfo {
  warnings: PlanWarning[];
  usage?: TokenUsage;
  repairRounds: number;
  durationMs: number;
}

const merge = <T extends object>(a: T, b: T | undefined): T => (b ? { ...a, ...b } : a);

export const RunStateAnnotation = Annotation.Root({
  runId: Annotation<string>,
  /** The validated plan (defaults applied). Absent in the input when the planner node writes it from `request`. */
  plan: Annotation<ToolChainPlan>,
  /** What to do, in words: the planner node plans it when no plan is given. */
  request: Annotation<string | undefined>,
  /** Skills the planner may use (the workspace allowlist, resolved to names); absent: every registered skill. */
  allowedSkills: Annotation<string[] | null | undefined>,
  /** Who wrote the plan and what admission changed (src/plan/admission.ts); set by the planner node. */
  admission: Annotation<Admission | null>({ reducer: (_a, b) => b, default: () => null }),
  /** Set by the planner node when it wrote the plan. */
  planning: Annotation<PlanningRecord | null>({ reducer: (_a, b) => b, default: () => null }),
  context: Annotation<unknown>,
  /** The run's workspace, for skills (SkillContext.workspaceId); absent in runs started before it existed. */
  workspaceId: Annotation<string | undefined>,
  memory: Annotation<Record<string, unknown>>({ reducer: merge, default: () => ({}) }),
  steps: Annotation<Record<string, StepRecord>>({ reducer: merge, default: () => ({}) }),
  /** Step ids in the order they completed: compensation walks it backwards. */
  completionOrder: Annotation<string[]>({ reducer: (a, b) => (b?.length ? a.concat(b) : a), default: () => [] }),
  decisions: Annotation<Record<string, Decision>>({ reducer: merge, default: () => ({}) }),
  status: Annotation<RunStatus>,
  error: Annotation<StepError | null>({ reducer: (_a, b) => b, default: () => null }),
  /** Why the scheduler stopped launching: compensation runs when set. */
  halt: Annotation<"fail_fast" | "deadline" | "cancelled" | null>({ reducer: (_a, b) => b, default: () => null }),
  rollbackBlocked: Annotation<RollbackBlock | null>({ reducer: (_a, b) => b, default: () => null }),
  rollbackDecision: Annotation<{ stepId: string; action: RollbackAction } | null>({ reducer: (_a, b) => b, default: () => null }),
  /** The scheduler drained after env.segmentTasks tasks and must run again. */
  segmentEnded: Annotation<boolean>({ reducer: (_a, b) => b, default: () => false }),
  /** Execution time used so far (time waiting for a human does not count against the deadline). */
  elapsedMs: Annotation<number>({ reducer: (_a, b) => b, default: () => 0 }),
  createdAt: Annotation<string>,
  updatedAt: Annotation<string>({ reducer: (_a, b) => b, default: () => new Date(0).toISOString() }),
});

export type RunState = typeof RunStateAnnotation.State;
export type RunUpdate = typeof RunStateAnnotation.Update;
