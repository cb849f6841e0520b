/** Public API of the toolchain runtime. */
export { createRuntime, Runtime, type RuntimeOptions, type RunOptions, type RunHandle } from "./runtime/runtime.js";
export {
  DECISION_VALUES,
  DecisionSchema,
  type Decision,
  type DecisionValue,
  type ConfirmInput,
} from "./kernel/decision.js";
export type { RunView, StepView } from "./kernel/run-view.js";
export {
  defineSkill,
  type Skill,
  type SkillContext,
  type SideEffects,
  type CompensationContext,
} from "./skills/contract.js";
export { SkillRegistry, type SkillManifestEntry } from "./skills/registry.js";
export {
  ToolChainPlanSchema,
  ToolChainStepSchema,
  type ToolChainPlan,
  type ToolChainPlanInput,
  type ToolChainStep,
} from "./plan/schema.js";
export { compilePlan, PlanValidationError, type CompiledPlan, type PlanIssue } from "./plan/validate.js";
export { exportPlanGraph, type PlanGraph } from "./plan/graph-export.js";
export { ErrorCode, ToolchainError, type StepError } from "./kernel/errors.js";
export { StepStatus, RunStatus, RollbackStatus } from "./kernel/status.js";
export { EventType, type RunEvent } from "./kernel/events.js";
export { Scheduler } from "./kernel/scheduler.js";
export { coreSkills } from "../skills/core/index.js";
export {
  qtableSkills,
  QTABLE_SKILL_NAMES,
  MemoryTableStore,
  PgTableStore,
  migrateQTable,
  TASKS_TABLE,
  generateGantt,
  decomposeGoal,
  estimateTask,
  type QTableOptions,
  type SplitWith,
  type EstimateWith,
  type Estimate,
  type Task,
  type TableStore,
  type Table,
  type Field,
  type TableDefinition,
  type TableRecord,
  type Gantt,
  type GanttInput,
} from "../skills/qtable/index.js";
export {
  Planner,
  plannerConfigFromEnv,
  OpenAiPlanModel,
  type PlannerOptions,
  type PlannerConfig,
  type PlanningInput,
  type PlanningOutcome,
  type PlannerInfo,
  type PlanWarning,
  type FallbackReason,
  type PlanModel,
  type TokenUsage,
} from "./planner/index.js";
export { modelTaskSplitter } from "./planner/task-splitter.js";
export { modelTaskEstimator } from "./planner/task-estimator.js";
export {
  createToolChainTools,
  toolCallRunId,
  type ToolChainToolsOptions,
  type RunToolChainOutput,
  type WaitingAnswer,
  type ToolChainErrorResult,
} from "./tools/langchain.js";
export {
  ToolChainResumeSchema,
  type ToolChainInterrupt,
  type ToolChainResume,
  type ToolChainDecision,
  type AgentRunResult,
  type AgentPendingStep,
} from "./tools/agent-confirmation.js";
