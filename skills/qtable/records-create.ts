/**
 * qtable.task.records.create: write records (or tasks mapped onto the table's schema) into a table
 * of the caller's workspace. Tasks are matched to rows by the table's key column: re-planning the
 * same goal updates its rows instead of adding copies (records-plan.ts), dependencies become
 * record links when the table has a relation column. A write: requires confirmation (the preview
 * is the diff: created / updated / unchanged rows), is idempotent through the runtime's
 * idempotency key, compensated once by the store's undo of exactly this write (created rows
 * deleted, updated rows restored to their previous values), and reconcilable after a crash.
 */
import { z } from "zod";
import { defineSkill } from "../../src/skills/contract.js";
import { rowsOf, validateRecords } from "./mapping.js";
import { planRecords, type RecordsPlan } from "./records-plan.js";
import { tableFor } from "./schema-describe.js";
import { EstimateSchema, GanttSchema, TableIdSchema, TaskSchema } from "./schemas.js";
import { checkWrite } from "./limits.js";
import { HOLIDAY_LOCALES, holidaysOf } from "./holidays.js";
import { MAX_PAGE, newRecordId, type TableStore, type WritePlan, type WriteResult } from "./store.js";
import type { Table } from "./fields.js";

const RecordsForm = z
  .object({
    tableId: TableIdSchema,
    records: z
      .array(z.record(z.string(), z.unknown()))
      .min(1)
      .max(1_000)
      .describe("Records as { <field name>: value }, validated against the table's field types"),
  })
  .strict();
const TasksForm = z
  .object({
    tableId: TableIdSchema,
    goal: z
      .string()
      .trim()
      .min(1)
      .max(500)
      .optional()
      .describe(
        "The goal the tasks plan (the split's goal): rows carry it in a goal column, and a re-plan of the same goal marks its rows the plan no longer has as removed",
      ),
    tasks: z
      .array(TaskSchema)
      .min(1)
      .max(1_000)
      .describe(
        "Tasks (qtable.task.split), mapped onto the table's fields by name: key (rows with the task's key are updated, not duplicated), title, description, estimate, start/end, status (new rows only), dependsOn (record links in a relation field, else the keys as text)",
      ),
    estimates: z
      .array(EstimateSchema)
      .max(1_000)
      .optional()
      .describe("qtable.task.estimate's estimates: fill the estimate field"),
    gantt: GanttSchema.optional().describe("qtable.gantt.generate's output: fills start/end"),
  })
  .strict();
export const RecordsCreateInputSchema = z.union([RecordsForm, TasksForm]);
type RecordsCreateInput = z.infer<typeof RecordsCreateInputSchema>;

export const RecordsCreateOutputSchema = z.object({
  tableId: z.string(),
  /** The records this write created. */
  recordIds: z.array(z.string()),
  records: z.array(z.looseObject({ id: z.string() })),
  /** The existing records this write updated. */
  updatedIds: z.array(z.string()),
  /** false: this idempotency key had written before; these are the records it created and updated then. */
  created: z.boolean(),
});
type RecordsCreateOutput = z.infer<typeof RecordsCreateOutputSchema>;

/** Every record of the table (re-planning matches tasks against all of them). */
async function allRecords(store: TableStore, workspaceId: string, tableId: string) {
  const out = [];
  let cursor: string | undefined;
  do {
    const page = await store.listRecords(workspaceId, tableId, { limit: MAX_PAGE, cursor });
    if (!page) break;
    out.push(...page.records);
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  return out;
}

/** What the write would do, validated and within the write's byte bound (the preview refuses what the write would). */
async function planned(
  store: TableStore,
  workspaceId: string,
  table: Table,
  args: RecordsCreateInput,
  newId: (key: string) => string,
): Promise<RecordsPlan> {
  let plan: RecordsPlan;
  if ("records" in args) {
    plan = {
      create: validateRecords(table, args.records).map((values, i) => ({
        key: String(i),
        id: newId(String(i)),
        values,
      })),
      update: [],
      unchanged: [],
      remove: [],
    };
  } else {
    plan = planRecords(table, args, await allRecords(store, workspaceId, table.id), newId);
  }
  checkWrite(
    store.limits,
    [...plan.create, ...plan.update, ...plan.remove].map((r) => r.values),
  );
  return plan;
}

/** The locale's public holidays and the team's own from `from` to `to` (a chart shades them; it cannot compute a locale's). */
function holidaysBetween(
  cal: NonNullable<z.infer<typeof GanttSchema>["calendar"]>,
  from: string,
  to: string,
): string[] {
  const locale = HOLIDAY_LOCALES.find((l) => l === cal.locale) ?? "none";
  const years = Array.from(
    { length: Number(to.slice(0, 4)) - Number(from.slice(0, 4)) + 1 },
    (_, i) => Number(from.slice(0, 4)) + i,
  );
  const all = new Set([...years.slice(0, 5).flatMap((y) => holidaysOf(locale, y)), ...cal.holidays]);
  return [...all].filter((d) => d >= from && d <= to).sort();
}

/** The Gantt as the approver sees it: each task's title, dates (half days marked), slack and whether it is critical; the holidays in its span. */
function timelineOf(tasks: readonly { key: string; title: string }[], gantt: z.infer<typeof GanttSchema>) {
  const title = new Map(tasks.map((t) => [t.key, t.title]));
  const critical = new Set((gantt.criticalPaths ?? [gantt.criticalPath]).flat());
  const from = gantt.items.reduce((m, i) => (i.start < m ? i.start : m), gantt.finish);
  return {
    finish: gantt.finish,
    ...(gantt.calendar
      ? { calendar: gantt.calendar, daysOff: holidaysBetween(gantt.calendar, from, gantt.finish) }
      : {}),
    criticalPath: gantt.criticalPath,
    items: gantt.items.map((i) => ({ ...i, title: title.get(i.key) ?? i.key, critical: critical.has(i.key) })),
  };
}

const toWrite = (p: RecordsPlan): WritePlan => ({
  creates: p.create.map(({ id, values }) => ({ id, values })),
  // a removed row is an update of its status: kept with its previous values, restored by the undo
  updates: [...p.update, ...p.remove].map(({ id, values }) => ({ id, values })),
});

function toOutput(w: WriteResult): RecordsCreateOutput {
  return {
    tableId: w.tableId,
    recordIds: w.records.map((r) => r.id),
    records: [...w.records, ...w.updated].map((r) => ({ ...r.values, id: r.id })),
    updatedIds: w.updated.map((r) => r.id),
    created: w.created,
  };
}

export function recordsCreateSkill(store: TableStore) {
  return defineSkill({
    name: "qtable.task.records.create",
    description:
      "Write records into a table of the caller's workspace: `{ tableId, records: [{ <field>: value }] }` (created), or `{ tableId, tasks, estimates?, gantt? }` mapped onto the table's schema (key, title, description, estimate, start/end from the Gantt, status, dependsOn as record links). Tasks whose key already has a row update it (re-planning does not duplicate; the row's status is kept); with `goal`, rows of the goal's earlier plan that this one no longer has get status removed; a task's `phase` becomes its parent row. Values are validated against the field types. Requires confirmation (the preview is the diff: created / updated / unchanged / removed rows); idempotent per run step; rolled back once by deleting the rows it created and restoring the rows it updated or marked removed.",
    input: RecordsCreateInputSchema,
    output: RecordsCreateOutputSchema,
    sideEffects: "write",
    idempotent: true,
    // writes to one table never overlap within a run (row order = plan order)
    serialKey: (a) => `qtable:${a.tableId}`,
    requiresConfirmation: true,
    async preview(args, ctx) {
      const table = await tableFor(store, ctx.workspaceId, args.tableId);
      const p = await planned(store, ctx.workspaceId, table, args, (key) => `new:${key}`.slice(0, 64));
      const rows = [...p.create, ...p.update, ...p.unchanged];
      const order = new Map(("tasks" in args ? rowsOf(args) : rows).map((r, i) => [r.key, i]));
      rows.sort((a, b) => order.get(a.key)! - order.get(b.key)!);
      return {
        action: "write_records",
        table: { id: table.id, name: table.name },
        ...(p.keyField ? { keyField: p.keyField } : {}),
        count: rows.length,
        // every row as it will read after the write, in task order
        records: rows.map((r) => r.values),
        // the schedule itself, for a chart (the console) or a text Gantt (the CLI)
        ...("tasks" in args && args.gantt ? { timeline: timelineOf(args.tasks, args.gantt) } : {}),
        diff: {
          created: p.create.map((r) => ({ key: r.key, values: r.values })),
          updated: p.update.map((r) => ({
            key: r.key,
            id: r.id,
            changed: r.changed,
            before: Object.fromEntries(r.changed.map((f) => [f, r.before[f] ?? null])),
            after: Object.fromEntries(r.changed.map((f) => [f, r.values[f] ?? null])),
          })),
          unchanged: p.unchanged.map((r) => ({ key: r.key, id: r.id })),
          // rows of this goal's earlier plan the plan no longer has: marked removed on approval
          removed: p.remove.map((r) => ({ key: r.key, id: r.id, values: r.before })),
        },
      };
    },
    estimateDurationMs: (a) => 10 + ("records" in a ? a.records.length : a.tasks.length),
    async execute(args, ctx) {
      const table = await tableFor(store, ctx.workspaceId, args.tableId);
      const p = await planned(store, ctx.workspaceId, table, args, () => newRecordId());
      return toOutput(await store.applyWrite(ctx.workspaceId, table.id, toWrite(p), ctx.idempotencyKey));
    },
    createdRecords: {
      // what the output claims (shown in the rollback's record) ...
      list: (out) => out.recordIds.map((id) => ({ resource: out.tableId, id })),
      // ... is never what gets deleted or restored: the output may come from a fallback value or
      // any other source the run controls. The store's own record of this step's write, in the
      // run's workspace, names the records it created and the previous values of those it updated.
      // The store undoes a write once (a repeat is a no-op).
      async delete(_claimed, c) {
        // effectKey: the idempotency key of the execution being undone (the step's skill, or this
        // skill run as the step's fallback): exactly that write, in the run's workspace
        await store.deleteWrite(c.workspaceId, c.effectKey);
      },
    },
    async reconcile(c) {
      const w = await store.findWrite(c.workspaceId, c.idempotencyKey);
      return w ? { applied: true, output: toOutput(w) } : { applied: false };
    },
  });
}
