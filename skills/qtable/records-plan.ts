/**
 * Re-planning into a table, pure: tasks (+ estimates, + Gantt) against the table's rows, matched
 * by the task key column. A task whose key has a row updates it (or leaves it unchanged when its
 * values are the same); one without creates a row. The preview and the write compute the same
 * plan, so the diff the approver sees is the write; only new rows' ids differ (the preview shows
 * `new:<key>` where the write uses fresh record ids).
 */
import type { RecordValues, Table, TableRecord } from "./fields.js";
import { fieldMapping, recordsFromTasks, validateRecords, type MapTasksInput } from "./mapping.js";

export interface PlannedRow {
  key: string;
  id: string;
  values: RecordValues;
}
export interface RecordsPlan {
  /** The table's key column, when it has one (without it every task creates a row). */
  keyField?: string;
  create: PlannedRow[];
  update: (PlannedRow & { before: RecordValues; changed: string[] })[];
  unchanged: PlannedRow[];
}

const same = (a: unknown, b: unknown) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

export function planRecords(table: Table, input: MapTasksInput, existing: readonly TableRecord[], newId: (key: string) => string): RecordsPlan {
  const m = fieldMapping(table);
  const keyField = m.key;
  const rowOf = new Map<string, TableRecord>();
  if (keyField) {
    for (const r of existing) {
      const k = r.values[keyField];
      // the first row carrying a key is the task's row (rows added by hand with the key stay as they are)
      if (typeof k === "string" && !rowOf.has(k)) rowOf.set(k, r);
    }
  }
  const ids = new Map(input.tasks.map((t) => [t.key, rowOf.get(t.key)?.id ?? newId(t.key)]));
  const values = validateRecords(table, recordsFromTasks(table, input, (k) => ids.get(k)!));
  const plan: RecordsPlan = { ...(keyField ? { keyField } : {}), create: [], update: [], unchanged: [] };
  input.tasks.forEach((t, i) => {
    const id = ids.get(t.key)!;
    const row = rowOf.get(t.key);
    if (!row) return plan.create.push({ key: t.key, id, values: values[i]! });
    // a re-plan does not reset what the team changed since: the status stays the row's
    const mine = { ...values[i]! };
    if (m.status) delete mine[m.status];
    const after: RecordValues = { ...row.values, ...mine };
    const changed = Object.keys(mine).filter((f) => !same(row.values[f], mine[f]));
    if (changed.length) plan.update.push({ key: t.key, id, values: after, before: row.values, changed });
    else plan.unchanged.push({ key: t.key, id, values: row.values });
  });
  return plan;
}
