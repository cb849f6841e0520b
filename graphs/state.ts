/**
 * The run's graph state: what the checkpointer stores for every run. The field types are declared
 * once in src/kernel/run-state.ts; this file adds LangGraph's reducers and defaults, and the type
 * check below fails if the two drift apart.
 */
import { Annotation } from "@langchain/langgraph";
import type { RunState as KernelRunState } from "../src/kernel/run-state.js";

export type {
  Decision,
  PlanningRecord,
  RedriveRecord,
  RollbackAction,
  RollbackBlock,
  StepRecord,
} from "../src/kernel/run-state.js";

type F<K extends keyof KernelRunState> = KernelRunState[K];

const merge = <T extends object>(a: T, b: T | undefined): T => (b ? { ...a, ...b } : a);
const append = <T>(a: T[], b: T[] | undefined): T[] => (b?.length ? a.concat(b) : a);

/** Channels whose writes are merged into the record they hold, and lists written by appending (graphs/changes-only.ts). */
export const MERGED_CHANNELS = ["memory", "steps", "decisions"] as const satisfies readonly (keyof KernelRunState)[];
export const APPENDED_CHANNELS = ["completionOrder", "redrives"] as const satisfies readonly (keyof KernelRunState)[];

export const RunStateAnnotation = Annotation.Root({
  runId: Annotation<F<"runId">>,
  /** The validated plan (defaults applied). Absent in the input when the planner node writes it from `request`. */
  plan: Annotation<F<"plan">>,
  /** What to do, in words: the planner node plans it when no plan is given. */
  request: Annotation<F<"request">>,
  /** Skills the planner may use (the workspace allowlist, resolved to names); absent: every registered skill. */
  allowedSkills: Annotation<F<"allowedSkills">>,
  /** Who wrote the plan and what admission changed (src/plan/admission.ts); set by the planner node. */
  admission: Annotation<F<"admission">>({ reducer: (_a, b) => b, default: () => null }),
  /** Set by the planner node when it wrote the plan. */
  planning: Annotation<F<"planning">>({ reducer: (_a, b) => b, default: () => null }),
  context: Annotation<F<"context">>,
  /** The run's workspace, for skills (SkillContext.workspaceId); absent in runs started before it existed. */
  workspaceId: Annotation<F<"workspaceId">>,
  memory: Annotation<F<"memory">>({ reducer: merge, default: () => ({}) }),
  steps: Annotation<F<"steps">>({ reducer: merge, default: () => ({}) }),
  /** Step ids in the order they completed: compensation walks it backwards. */
  completionOrder: Annotation<F<"completionOrder">>({ reducer: append, default: () => [] }),
  decisions: Annotation<F<"decisions">>({ reducer: merge, default: () => ({}) }),
  status: Annotation<F<"status">>,
  error: Annotation<F<"error">>({ reducer: (_a, b) => b, default: () => null }),
  /** Why the scheduler stopped launching: compensation runs when set. */
  halt: Annotation<F<"halt">>({ reducer: (_a, b) => b, default: () => null }),
  rollbackBlocked: Annotation<F<"rollbackBlocked">>({ reducer: (_a, b) => b, default: () => null }),
  rollbackDecision: Annotation<F<"rollbackDecision">>({
    reducer: (_a, b) => b,
    default: () => null,
  }),
  /** The scheduler drained after env.segmentTasks tasks and must run again. */
  segmentEnded: Annotation<F<"segmentEnded">>({ reducer: (_a, b) => b, default: () => false }),
  /** Each skill's version as the run was planned against it (src/skills/version.ts). */
  skillVersions: Annotation<F<"skillVersions">>({ reducer: (a, b) => b ?? a, default: () => null }),
  /** Each redrive of the run, in order (graphs/redrive.ts). */
  redrives: Annotation<F<"redrives">>({ reducer: append, default: () => [] }),
  /** Execution time used so far (time waiting for a human does not count against the deadline). */
  elapsedMs: Annotation<F<"elapsedMs">>({ reducer: (_a, b) => b, default: () => 0 }),
  createdAt: Annotation<F<"createdAt">>,
  updatedAt: Annotation<F<"updatedAt">>({ reducer: (_a, b) => b, default: () => new Date(0).toISOString() }),
});

export type RunState = typeof RunStateAnnotation.State;
export type RunUpdate = typeof RunStateAnnotation.Update;

// drift check: the annotation's state is exactly the kernel's RunState
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const stateMatchesKernel: Same<RunState, KernelRunState> = true;
void stateMatchesKernel;
