/**
 * What a Runtime is built from and what its calls take and give back (src/runtime/runtime.ts).
 */
import type { TraceCarrier } from "../telemetry/trace-context.js";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import type { RuntimeEnv } from "../../graphs/env.js";
import type { RunEvent } from "../kernel/events.js";
import type { LimitCoordinator } from "../kernel/limits.js";
import type { PlanAuthor, PlanBudget } from "../plan/admission.js";
import type { Acting } from "../kernel/actor.js";
import type { ApprovalDefaults } from "../kernel/approval-policy.js";
import type { CompiledPlan } from "../plan/validate.js";
import type { Planner, PlannerOptions } from "../planner/index.js";
import type { Skill } from "../skills/contract.js";
import type { SkillRegistry } from "../skills/registry.js";
import type { DriveRetryPolicy, RunStore } from "../store/run-store.js";
import type { RunView } from "../kernel/run-view.js";

export interface RuntimeOptions {
  /** Budget for model- and agent-written plans. @default planBudgetFromEnv() (50 steps, 10 confirmations, fan-out 20) */
  planBudget?: Partial<PlanBudget>;
  /**
   * Workspace default approval policies (workspace id, or "*" for every workspace): the floor of
   * every confirmation there; skills and plan steps only tighten it.
   * @default parsed from TOOLCHAIN_APPROVAL_DEFAULTS (JSON), else none
   */
  approvalDefaults?: ApprovalDefaults;
  /** Extra skills (core.* are always present), or a registry to use as is. */
  skills?: Skill[] | SkillRegistry;
  /** @default new MemorySaver() */
  checkpointer?: BaseCheckpointSaver;
  /** Run history (runs, step runs, events, leases, decisions). @default in memory */
  store?: RunStore;
  /** Workspace allowlist enforced by validation. */
  allowSkill?: (name: string) => boolean;
  env?: Partial<Omit<RuntimeEnv, "registry">>;
  /** This process's identity for run leases. @default hostname:pid:random */
  owner?: string;
  /** A run's lease lasts this long without a heartbeat (a dead process's runs are taken over after it). @default 15000 */
  /**
   * How long a run whose pinned skill version no process here has waits for one (another
   * generation still deploying or draining) before it fails with SKILL_VERSION_UNAVAILABLE.
   * @default TOOLCHAIN_VERSION_GRACE_MS, else 1 hour
   */
  versionGraceMs?: number;
  leaseTtlMs?: number;
  /** How often a drive looks for decisions and cancels recorded by other processes. @default 200 */
  decisionPollMs?: number;
  /**
   * The planner for runs started from a request: its configuration (model, baseURL, ...; merged
   * over the environment's) or a Planner. @default configured from the environment (plannerConfigFromEnv)
   */
  planner?: PlannerOptions | Planner;
  /** Bounded re-drives of a run whose drive throws (see README, Durability). */
  driveRetry?: Partial<DriveRetryPolicy>;
  /**
   * Coordinates serial keys and resources between runs. @default in-process limits shared by every
   * Runtime over the same store (openRuntime passes Postgres limits shared by every process)
   */
  limits?: LimitCoordinator;
}

export interface RunOptions {
  context?: unknown;
  memory?: Record<string, unknown>;
  runId?: string;
  workspaceId?: string;
  /** The run's trace id (a REST `traceparent`'s). @default the caller's active span's, else a new one */
  traceId?: string;
  /** Set by the runtime (src/telemetry/run-spans.ts `openRunTrace`): the context stored with the run. */
  traceContext?: TraceCarrier;
  /** This call's skill allowlist (e.g. the workspace's), applied on top of the runtime's `allowSkill`. */
  allowSkill?: (name: string) => boolean;
  /** What `validateAsync(plan, these options)` returned: the plan is not validated again. */
  compiled?: CompiledPlan;
  /**
   * Who wrote the plan (src/plan/admission.ts). Model- and agent-written plans are clamped and
   * budgeted; a person may remove confirmations only with `mayRelaxConfirmation`.
   * @default { kind: "person", via: "library", mayRelaxConfirmation: true } (the embedding code)
   */
  author?: PlanAuthor;
  /** Who asked for the run, through which surface (recorded as the run's `requestedBy`). @default LIBRARY_ACTING */
  requestedBy?: Acting;
}

export interface RunHandle {
  runId: string;
  /** Events of this execution of the run, as they are stored (numbered). */
  events: AsyncIterable<RunEvent>;
  /** The run view when the run is terminal or waits for confirmation. */
  result: Promise<RunView>;
  /**
   * Stop waiting: a handle on a run executed elsewhere polls the store until the run settles;
   * a caller that gives up (a request that timed out) releases it, and `result` rejects.
   * A no-op for runs executed here.
   */
  release?(): void;
}
