/**
 * The QTable skill pack: a table store per workspace and the task-planning skills over it.
 *
 *   const store = new MemoryTableStore();              // or new PgTableStore(db) (openRuntime does this)
 *   const rt = createRuntime({ skills: qtableSkills({ store }) });
 *
 * `splitWith` / `estimateWith` plug in a model (openRuntime: the planner's) for qtable.task.split /
 * qtable.task.estimate; without them the split is a template for the goal's kind and the
 * estimates come from the table's history, else from each task's verb.
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
  /** The planner's model for qtable.task.split. Absent: the goal kind's template (labelled). */
  splitWith?: SplitWith;
  /** The planner's model for qtable.task.estimate. Absent: the table's history, else heuristics on each task's verb. */
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
    taskEstimateSkill({ estimateWith: opts.estimateWith, store: opts.store }),
    ganttGenerateSkill(opts.store),
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
export {
  TASKS_TABLE,
  TableDefinitionSchema,
  FieldSchema,
  type Table,
  type Field,
  type TableDefinition,
  type TableRecord,
} from "./fields.js";
export { generateGantt, type Gantt, type GanttInput, type GanttLink, type GanttAssignee } from "./gantt.js";
export { workspaceCalendar, CalendarSettingSchema, type WorkspaceCalendar, type CalendarSetting } from "./calendar.js";
export { UnreadableAnswer } from "./model-answer.js";
export { decomposeGoal, templateTasks, goalKind, GOAL_KINDS, type GoalKind } from "./templates.js";
export { estimateTask } from "./estimate-heuristics.js";
export { HOLIDAY_LOCALES, holidaysOf, type HolidayLocale } from "./holidays.js";
