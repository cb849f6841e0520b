/**
 * qtable.task.records.create: write records (or tasks mapped onto the table's schema) into a table
 * of the caller's workspace. A write: requires confirmation (the preview lists the records), is
 * idempotent through the runtime's idempotency key, compensated by deleting exactly the records it
 * created, and reconcilable after a crash.
 */
import { z } from "zod";
import { defineSkill } from "../../src/skills/contract.js";
import { recordsFromTasks, validateRecords } from "./mapping.js";
import { tableFor } from "./schema-describe.js";
import { EstimateSchema, GanttSchema, TableIdSchema, TaskSchema } from "./schemas.js";
import { checkWrite } from "./limits.js";
import type { TableStore, WriteResult } from "./store.js";
import type { RecordValues, Table } from "./fields.js";

const RecordsForm = z
  .object({
    tableId: TableIdSchema,
    records: z.array(z.record(z.string(), z.unknown())).min(1).max(1_000).describe("Records as { <field name>: value }, validated against the table's field types"),
  })
  .strict();
const TasksForm = z
  .object({
    tableId: TableIdSchema,
    tasks: z.array(TaskSchema).min(1).max(1_000).describe("Tasks (qtable.task.split), mapped onto the table's fields by name: title, description, estimate, start/end, status, dependsOn"),
    estimates: z.array(EstimateSchema).max(1_000).optional().describe("qtable.task.estimate's estimates: fill the estimate field"),
    gantt: GanttSchema.optional().describe("qtable.gantt.generate's output: fills start/end"),
  })
  .strict();
export const RecordsCreateInputSchema = z.union([RecordsForm, TasksForm]);
type RecordsCreateInput = z.infer<typeof RecordsCreateInputSchema>;

export const RecordsCreateOutputSchema = z.object({
  tableId: z.string(),
  recordIds: z.array(z.string()),
  records: z.array(z.looseObject({ id: z.string() })),
  /** false: this idempotency key had written before; these are the records it created then. */
  created: z.boolean(),
});
type RecordsCreateOutput = z.infer<typeof RecordsCreateOutputSchema>;

/** The values to write, validated and within the write's byte bound (the preview refuses what the write would). */
function planned(store: TableStore, table: Table, args: RecordsCreateInput): RecordValues[] {
  const values = validateRecords(table, "records" in args ? args.records : recordsFromTasks(table, args));
  checkWrite(store.limits, values);
  return values;
}

/**
 * The idempotency keys the step's own executions wrote under: its attempts (`runId:stepId`) and
 * its fallback skill's (`runId:stepId:fallback`, when that is a records write too). A fallback
 * *value* or anything else in the output wrote nothing, so it names nothing to delete.
 */

function toOutput(w: WriteResult): RecordsCreateOutput {
  return { tableId: w.tableId, recordIds: w.records.map((r) => r.id), records: w.records.map((r) => ({ ...r.values, id: r.id })), created: w.created };
}

export function recordsCreateSkill(store: TableStore) {
  return defineSkill({
    name: "qtable.task.records.create",
    description:
      "Create records in a table of the caller's workspace: `{ tableId, records: [{ <field>: value }] }`, or `{ tableId, tasks, estimates?, gantt? }` mapped onto the table's schema (title, description, estimate, start/end from the Gantt, status, dependsOn). Values are validated against the field types. Requires confirmation (the preview lists the records); idempotent per run step; rolled back by deleting exactly the records it created.",
    input: RecordsCreateInputSchema,
    output: RecordsCreateOutputSchema,
    sideEffects: "write",
    idempotent: true,
    // writes to one table never overlap within a run (row order = plan order)
    serialKey: (a) => `qtable:${a.tableId}`,
    requiresConfirmation: true,
    async preview(args, ctx) {
      const table = await tableFor(store, ctx.workspaceId, args.tableId);
      const records = planned(store, table, args);
      return { action: "create_records", table: { id: table.id, name: table.name }, count: records.length, records };
    },
    estimateDurationMs: (a) => 10 + ("records" in a ? a.records.length : a.tasks.length),
    async execute(args, ctx) {
      const table = await tableFor(store, ctx.workspaceId, args.tableId);
      const values = planned(store, table, args);
      return toOutput(await store.createRecords(ctx.workspaceId, table.id, values, ctx.idempotencyKey));
    },
    createdRecords: {
      // what the output claims (shown in the rollback's record) ...
      list: (out) => out.recordIds.map((id) => ({ resource: out.tableId, id })),
      // ... is never what gets deleted: the output may come from a fallback value or any other
      // source the run controls. The store's own record of this step's writes, in the run's
      // workspace, names the records. Deleting what is already gone is a no-op (idempotent).
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
