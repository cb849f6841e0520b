/**
 * The QTable skill pack: a table store per workspace and the task-planning skills over it.
 *
 *   const store = new MemoryTableStore();              // or new PgTableStore(db) (openRuntime does this)
 *   const rt = createRuntime({ skills: qtableSkills({ store }) });
 *
 * `splitWith` / `estimateWith` plug in a model (the planner's) for qtable.task.split /
 * qtable.task.estimate; without them both are deterministic.
 */
import type { Skill } from "../../src/skills/contract.js";
import { ganttGenerateSkill } from "./gantt-generate.js";
import { notifySendSkill } from "./notify-send.js";
import { recordsCreateSkill } from "./records-create.js";
import { schemaDescribeSkill } from "./schema-describe.js";
import type { TableStore } from "./store.js";
import { taskEstimateSkill, type EstimateWith } from "./task-estimate.js";
import { taskSplitSkill, type SplitWith } from "./task-split.js";

export interface QTableOptions {
  store: TableStore;
  /** The planner's model for qtable.task.split. Absent: deterministic decomposition. */
  splitWith?: SplitWith;
  /** The planner's model for qtable.task.estimate. Absent: deterministic heuristics. */
  estimateWith?: EstimateWith;
}

export const QTABLE_SKILL_NAMES = [
  "qtable.task.split",
  "qtable.task.estimate",
  "qtable.gantt.generate",
  "qtable.table.schema.describe",
  "qtable.task.records.create",
  "qtable.notify.send",
] as const;

export function qtableSkills(opts: QTableOptions): Skill[] {
  return [
    taskSplitSkill({ splitWith: opts.splitWith }),
    taskEstimateSkill({ estimateWith: opts.estimateWith }),
    ganttGenerateSkill,
    schemaDescribeSkill(opts.store),
    recordsCreateSkill(opts.store),
    notifySendSkill(opts.store),
  ] as Skill[];
}

export type { SplitWith } from "./task-split.js";
export type { EstimateWith, Estimate } from "./task-estimate.js";
export type { Task } from "./schemas.js";
export type { TableStore, WriteResult, RecordPage, TablePage, OutboxMessage } from "./store.js";
export { DEFAULT_TABLE_LIMITS, tableLimitsFromEnv, type TableLimits } from "./limits.js";
export { MemoryTableStore } from "./memory-store.js";
export { PgTableStore, migrateQTable } from "./pg-store.js";
export { TASKS_TABLE, TableDefinitionSchema, FieldSchema, type Table, type Field, type TableDefinition, type TableRecord } from "./fields.js";
export { generateGantt, type Gantt, type GanttInput } from "./gantt.js";
export { decomposeGoal, estimateTask } from "./decompose.js";
