/**
 * Re-planning into a table, pure: tasks (+ phases, + estimates, + Gantt) against the table's rows,
 * matched by the key column (within the goal's rows when the table has a goal column). A row
 * whose key has a row updates it (or leaves it unchanged when its values are the same); one
 * without creates a row; a row of an earlier plan of the same goal whose key the plan no longer
 * has is marked removed (its status set to `removed`: an update like any other, so the undo
 * restores it and a later plan with the key brings it back). The preview and the write compute
 * the same plan, so the diff the approver sees is the write; only new rows' ids differ (the
 * preview shows `new:<key>` where the write uses fresh record ids).
 */
import type { RecordValues, Table, TableRecord } from "./fields.js";
import { fieldMapping, recordsFromTasks, rowsOf, validateRecords, type MapTasksInput } from "./mapping.js";

/** The status option a row no longer planned gets (the demo table has it; other tables opt in by having it). */
export const REMOVED_STATUS = "removed";

export interface PlannedRow {
  key: string;
  id: string;
  values: RecordValues;
}
type Change = PlannedRow & { before: RecordValues; changed: string[] };
export interface RecordsPlan {
  /** The table's key column, when it has one (without it every task creates a row). */
  keyField?: string;
  create: PlannedRow[];
  update: Change[];
  unchanged: PlannedRow[];
  /** Rows of the goal's earlier plan that this plan no longer has: marked removed. */
  remove: Change[];
}

const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

export function planRecords(
  table: Table,
  input: MapTasksInput,
  existing: readonly TableRecord[],
  newId: (key: string) => string,
): RecordsPlan {
  const m = fieldMapping(table);
  const keyField = m.key;
  // with a goal column, a key matches the goal's rows first, then rows of no goal (added by hand,
  // or before the column): another goal's "requirements" row is not this one's
  const goalOf = (r: TableRecord) => (m.goal ? r.values[m.goal] : undefined);
  const mine = (r: TableRecord) => !!input.goal && goalOf(r) === input.goal;
  const rowOf = new Map<string, TableRecord>();
  if (keyField) {
    for (const pass of [mine, (r: TableRecord) => goalOf(r) === undefined || !input.goal]) {
      for (const r of existing) {
        const k = r.values[keyField];
        // the first row carrying a key is the task's row (rows added by hand with the key stay as they are)
        if (typeof k === "string" && !rowOf.has(k) && pass(r)) rowOf.set(k, r);
      }
    }
  }
  const rows = rowsOf(input);
  const ids = new Map(rows.map((t) => [t.key, rowOf.get(t.key)?.id ?? newId(t.key)]));
  const values = validateRecords(
    table,
    recordsFromTasks(table, input, (k) => ids.get(k)!),
  );
  const statusField = m.status ? table.fields.find((f) => f.name === m.status) : undefined;
  const canRemove = !!(keyField && m.goal && input.goal && statusField?.options?.includes(REMOVED_STATUS));
  const plan: RecordsPlan = {
    ...(keyField ? { keyField } : {}),
    create: [],
    update: [],
    unchanged: [],
    remove: [],
  };
  rows.forEach((t, i) => {
    const id = ids.get(t.key)!;
    const row = rowOf.get(t.key);
    if (!row) return plan.create.push({ key: t.key, id, values: values[i]! });
    // a re-plan does not reset what the team changed since: the status stays the row's, unless
    // the row had been removed by an earlier plan (planned again, it starts over)
    const next = { ...values[i]! };
    if (m.status && row.values[m.status] !== REMOVED_STATUS) delete next[m.status];
    const after: RecordValues = { ...row.values, ...next };
    const changed = Object.keys(next).filter((f) => !same(row.values[f], next[f]));
    if (changed.length) plan.update.push({ key: t.key, id, values: after, before: row.values, changed });
    else plan.unchanged.push({ key: t.key, id, values: row.values });
  });
  if (canRemove) {
    const planned = new Set(rows.map((r) => r.key));
    for (const r of existing) {
      const k = r.values[keyField!];
      if (typeof k !== "string" || planned.has(k) || !mine(r) || r.values[m.status!] === REMOVED_STATUS) continue;
      plan.remove.push({
        key: k,
        id: r.id,
        values: { ...r.values, [m.status!]: REMOVED_STATUS },
        before: r.values,
        changed: [m.status!],
      });
    }
  }
  return plan;
}
