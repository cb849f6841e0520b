/**
 * A run's durable state, as plain types: what the checkpointer stores for every run (the graph's
 * annotation in graphs/state.ts is declared from these, and the type check fails on drift), what the
 * store, the runtime and the API read. Declared here, where the data starts, so no lower layer
 * imports the graph for its types.
 */
import type { Decision } from "./decision.js";
import type { Acting } from "./actor.js";
import type { SkillVersion, VersionGap } from "./skill-version.js";
import type { StepError } from "./errors.js";
import type { RollbackStatus, RunStatus, StepStatus } from "./status.js";
import type { Admission } from "../plan/admission.js";
import type { ToolChainPlan } from "../plan/schema.js";
import type { PlannerInfo, TokenUsage } from "../planner/info.js";
import type { PlanWarning } from "../plan/clamp.js";

export type { Decision };

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
  /** The redrive (1, 2, …) that set this step to run again: its events are keyed apart (graphs/redrive.ts). */
  redrive?: number;
  /** Attempts made before the latest redrive: its retry budget counts from here. */
  attemptsBefore?: number;
  /** Set by a redrive: the last attempt may have had its effect; reconcile (else a person) before a new one. */
  redriveInDoubt?: boolean;
  /**
   * The skill version the recorded arguments (`input`, `approvedArguments`, or the fallback's) are
   * for, when it may differ from the run's pin: set when the step waits (its arguments were
   * migrated to that process's version), by an approver's edit and by `runs migrate`. A migration
   * starts from it, so arguments are never migrated twice.
   */
  argsVersion?: StepSkillVersion;
  /** The skill version that computed the wait's `preview` (what its approver was shown). */
  waitVersion?: StepSkillVersion;
}

/** A skill version with the skill's name (a step's skill, or its fallback skill). */
export interface StepSkillVersion extends SkillVersion {
  skill: string;
}

/** One redrive as the run's history keeps it (state, the `run_redriven` event, the view). */
export interface RedriveRecord {
  /** 1 for the first redrive of the run, 2 for the next… */
  n: number;
  at: string;
  by: Acting["by"];
  via: Acting["via"];
  /** The steps that run again. */
  steps: string[];
  /** Of those, the ones whose last attempt is reconciled (or decided by a person) first. */
  inDoubt: string[];
  /** Per step, the argument fields an operator changed: `{ field: { from, to } }`. */
  overrides: Record<string, Record<string, { from: unknown; to: unknown }>>;
}

/** Strict rollback stopped at a failed compensation; an operator decides what happens next. */
export interface RollbackBlock {
  stepId: string;
  round: number;
  error: StepError;
}
export type RollbackAction = "retry" | "skip" | "stop";

/** Which planner wrote the run's plan (absent when the caller gave the plan). */
export interface PlanningRecord extends PlannerInfo {
  warnings: PlanWarning[];
  usage?: TokenUsage;
  repairRounds: number;
  durationMs: number;
}

/** Why the scheduler stopped launching: compensation runs when set. */
export type Halt = "fail_fast" | "deadline" | "cancelled";

/** The run's graph state (see graphs/state.ts for what each field's reducer does). */
export interface RunState {
  runId: string;
  /** The validated plan (defaults applied). Absent in the input when the planner node writes it from `request`. */
  plan: ToolChainPlan;
  /** What to do, in words: the planner node plans it when no plan is given. */
  request: string | undefined;
  /** Skills the planner may use (the workspace allowlist, resolved to names); absent: every registered skill. */
  allowedSkills: string[] | null | undefined;
  /** Who wrote the plan and what admission changed (src/plan/admission.ts); set by the planner node. */
  admission: Admission | null;
  /** Set by the planner node when it wrote the plan. */
  planning: PlanningRecord | null;
  context: unknown;
  /** The run's workspace, for skills (SkillContext.workspaceId); absent in runs started before it existed. */
  workspaceId: string | undefined;
  memory: Record<string, unknown>;
  steps: Record<string, StepRecord>;
  /** Step ids in the order they completed: compensation walks it backwards. */
  completionOrder: string[];
  decisions: Record<string, Decision>;
  status: RunStatus;
  error: StepError | null;
  halt: Halt | null;
  rollbackBlocked: RollbackBlock | null;
  /** An operator's answer to a blocked strict rollback, with who gave it (absent in runs from before principals). */
  rollbackDecision: {
    stepId: string;
    action: RollbackAction;
    by?: Decision["by"];
    via?: Decision["via"];
    comment?: string;
  } | null;
  /** The scheduler drained after env.segmentTasks tasks and must run again. */
  segmentEnded: boolean;
  /** Each skill's version as the run was planned against it: a process drives the run only with compatible ones. */
  skillVersions: Record<string, SkillVersion> | null;
  /** Each redrive of the run, in order. */
  redrives: RedriveRecord[];
  /** Execution time used so far (time waiting for a human does not count against the deadline). */
  elapsedMs: number;
  createdAt: string;
  updatedAt: string;
}

/** Run facts only the runtime sets (never from a graph input); travels in `configurable.toolchain_seed`. */
export interface RunSeed {
  workspaceId?: string;
  /** The workspace's skill allowlist resolved to names; null: every registered skill. */
  allowedSkills?: string[] | null;
  createdAt?: string;
  /** Who wrote the plan, as the runtime admitted it (absent for a bare graph invocation: an agent via Studio). */
  admission?: Admission;
  /**
   * Set by the runtime once a pinned skill version has been unavailable for the grace period: the
   * scheduler fails the run with SKILL_VERSION_UNAVAILABLE before any further step starts.
   */
  versionUnavailable?: VersionGap;
}
