/**
 * Tasks (+ estimates, + Gantt items) → record values for a given table schema, by field names
 * and types, then validated against the schema. Pure: the preview and the write use the same
 * function, so what the approver sees is what gets written.
 */
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { checkRecord, type Field, type FieldType, type RecordValues, type Table } from "./fields.js";

export interface MapTasksInput {
  tasks: { key: string; title: string; description?: string; dependsOn?: string[] }[];
  estimates?: { key: string; days: number }[];
  gantt?: { items: { key: string; start: string; end: string }[] };
}

/** Candidate field names per role, in preference order (compared case-insensitively). */
const ROLES: Record<string, { type: FieldType | FieldType[]; names: string[] }> = {
  title: { type: "text", names: ["title", "name", "task", "summary"] },
  key: { type: "text", names: ["key", "taskkey", "ref"] },
  description: { type: "text", names: ["description", "details", "notes", "body"] },
  estimate: { type: "number", names: ["estimatedays", "estimate", "days", "effort", "estimateddays", "duration"] },
  start: { type: "date", names: ["start", "startdate", "begin", "from"] },
  end: { type: "date", names: ["end", "enddate", "due", "duedate", "finish", "to"] },
  status: { type: "select", names: ["status", "state"] },
  // a relation (record links) when the table has one, else the keys as text
  dependsOn: { type: ["relation", "text"], names: ["dependson", "dependencies", "depends_on", "blockedby"] },
};

function fieldFor(fields: readonly Field[], role: keyof typeof ROLES): Field | undefined {
  const r = ROLES[role]!;
  for (const type of Array.isArray(r.type) ? r.type : [r.type]) {
    for (const n of r.names) {
      const f = fields.find((x) => x.type === type && x.name.toLowerCase() === n);
      if (f) return f;
    }
  }
  return undefined;
}

/** How the table's fields are filled from tasks: role → field name. */
export function fieldMapping(table: Table): Record<string, string> {
  const out: Record<string, string> = {};
  for (const role of Object.keys(ROLES)) {
    const f = fieldFor(table.fields, role);
    if (f) out[role] = f.name;
  }
  if (!out.title) {
    // no title-like field: the first required text field carries the title
    const f = table.fields.find((x) => x.type === "text" && x.required && !Object.values(out).includes(x.name));
    if (f) out.title = f.name;
  }
  return out;
}

/**
 * `idOf` names the record of a task key (its existing row, or the id its new row will get): a
 * relation dependsOn field holds those ids; without it, relations are left out.
 */
export function recordsFromTasks(table: Table, input: MapTasksInput, idOf?: (key: string) => string): Record<string, unknown>[] {
  const m = fieldMapping(table);
  if (!m.title) throw new ToolchainError(ErrorCode.INVALID_INPUT, `table "${table.name}" has no text field to hold a task title (fields: ${table.fields.map((f) => f.name).join(", ")})`, { effectStarted: false });
  const est = new Map((input.estimates ?? []).map((e) => [e.key, e.days]));
  const dates = new Map((input.gantt?.items ?? []).map((i) => [i.key, i]));
  const keys = new Set(input.tasks.map((t) => t.key));
  const unknown = [...est.keys(), ...dates.keys()].filter((k) => !keys.has(k));
  if (unknown.length) throw new ToolchainError(ErrorCode.INVALID_INPUT, `estimates or Gantt items for unknown tasks: ${[...new Set(unknown)].join(", ")}`, { effectStarted: false });
  const statusField = m.status ? table.fields.find((f) => f.name === m.status) : undefined;
  const initialStatus = statusField?.options?.includes("todo") ? "todo" : statusField?.options?.[0];
  return input.tasks.map((t) => {
    const v: Record<string, unknown> = { [m.title!]: t.title };
    if (m.key) v[m.key] = t.key;
    if (m.description && t.description) v[m.description] = t.description;
    if (m.estimate && est.has(t.key)) v[m.estimate] = est.get(t.key);
    const d = dates.get(t.key);
    if (d && m.start) v[m.start] = d.start;
    if (d && m.end) v[m.end] = d.end;
    if (m.status && initialStatus) v[m.status] = initialStatus;
    if (m.dependsOn && t.dependsOn?.length) {
      const relation = table.fields.find((f) => f.name === m.dependsOn)!.type === "relation";
      if (!relation) v[m.dependsOn] = t.dependsOn.join(", ");
      else if (idOf) v[m.dependsOn] = t.dependsOn.map(idOf);
    }
    return v;
  });
}

/** Validate every record; INVALID_INPUT names the first bad record (index and title) and field. */
export function validateRecords(table: Table, records: Record<string, unknown>[]): RecordValues[] {
  return records.map((r, i) => {
    const c = checkRecord(table.fields, r);
    if (c.ok) return c.values;
    const label = typeof r.title === "string" ? ` (${JSON.stringify(r.title.length > 60 ? `${r.title.slice(0, 60)}…` : r.title)})` : "";
    throw new ToolchainError(ErrorCode.INVALID_INPUT, `record ${i}${label}, field "${c.field}": ${c.message}`, { effectStarted: false, details: { record: i, field: c.field, table: table.id } });
  });
}
