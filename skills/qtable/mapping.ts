/**
 * Tasks (+ estimates, + Gantt items) → record values for a given table schema, by field names
 * and types, then validated against the schema. Pure: the preview and the write use the same
 * function, so what the approver sees is what gets written.
 */
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { phasesOf } from "./task-list.js";
import { checkRecord, type Field, type FieldType, type RecordValues, type Table } from "./fields.js";

export interface MapTasksInput {
  /** The goal the tasks were planned for: rows carry it (a goal column), and a re-plan of it finds its rows by it. */
  goal?: string;
  tasks: {
    key: string;
    title: string;
    description?: string;
    dependsOn?: string[];
    assignee?: string;
    phase?: { key: string; title: string };
  }[];
  estimates?: { key: string; days: number }[];
  gantt?: { items: { key: string; start: string; end: string }[] };
}

/** Candidate field names per role, in preference order (compared case-insensitively). */
const ROLES: Record<string, { type: FieldType | FieldType[]; names: string[] }> = {
  title: { type: "text", names: ["title", "name", "task", "summary"] },
  key: { type: "text", names: ["key", "taskkey", "ref"] },
  goal: { type: "text", names: ["goal", "plan"] },
  // a task's phase row
  parent: { type: "relation", names: ["parent", "phase", "parentid", "parent_id"] },
  description: { type: "text", names: ["description", "details", "notes", "body"] },
  estimate: { type: "number", names: ["estimatedays", "estimate", "days", "effort", "estimateddays", "duration"] },
  start: { type: "date", names: ["start", "startdate", "begin", "from"] },
  end: { type: "date", names: ["end", "enddate", "due", "duedate", "finish", "to"] },
  status: { type: "select", names: ["status", "state"] },
  assignee: { type: "user", names: ["assignee", "owner", "assignedto", "assigned_to", "responsible"] },
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
 * The rows a task list writes, in order: each phase (phasesOf) right before its first task, as a
 * row of its own spanning its tasks' dates, then the tasks. `phase` on a task row is its parent's key.
 */
export function rowsOf(input: MapTasksInput): { key: string; title: string; phaseOf?: string[]; phase?: string }[] {
  const phases = new Map(phasesOf(input.tasks).map((p) => [p.key, p]));
  const out: { key: string; title: string; phaseOf?: string[]; phase?: string }[] = [];
  for (const t of input.tasks) {
    const ph = t.phase && phases.get(t.phase.key);
    if (ph) {
      phases.delete(ph.key);
      const members = input.tasks.filter((x) => x.phase?.key === ph.key).map((x) => x.key);
      out.push({ key: ph.key, title: ph.title, phaseOf: members });
    }
    out.push({ key: t.key, title: t.title, ...(t.phase ? { phase: t.phase.key } : {}) });
  }
  return out;
}

/**
 * One record per row of rowsOf. `idOf` names the record of a key (its existing row, or the id its
 * new row will get): relation dependsOn and parent fields hold those ids; without it, relations
 * are left out.
 */
export function recordsFromTasks(
  table: Table,
  input: MapTasksInput,
  idOf?: (key: string) => string,
): Record<string, unknown>[] {
  const m = fieldMapping(table);
  if (!m.title)
    throw new ToolchainError(
      ErrorCode.INVALID_INPUT,
      `table "${table.name}" has no text field to hold a task title (fields: ${table.fields.map((f) => f.name).join(", ")})`,
      { effectStarted: false },
    );
  const est = new Map((input.estimates ?? []).map((e) => [e.key, e.days]));
  const dates = new Map((input.gantt?.items ?? []).map((i) => [i.key, i]));
  const keys = new Set(input.tasks.map((t) => t.key));
  const unknown = [...est.keys(), ...dates.keys()].filter((k) => !keys.has(k));
  if (unknown.length)
    throw new ToolchainError(
      ErrorCode.INVALID_INPUT,
      `estimates or Gantt items for unknown tasks: ${[...new Set(unknown)].join(", ")}`,
      { effectStarted: false },
    );
  const statusField = m.status ? table.fields.find((f) => f.name === m.status) : undefined;
  const initialStatus = statusField?.options?.includes("todo") ? "todo" : statusField?.options?.[0];
  const task = new Map(input.tasks.map((t) => [t.key, t]));
  return rowsOf(input).map((row) => {
    const v: Record<string, unknown> = { [m.title!]: row.title };
    if (m.key) v[m.key] = row.key;
    if (m.goal && input.goal) v[m.goal] = input.goal;
    if (m.status && initialStatus) v[m.status] = initialStatus;
    if (row.phaseOf) {
      // a phase row spans its tasks' dates
      const spans = row.phaseOf.map((k) => dates.get(k)).filter((d) => d !== undefined);
      if (spans.length && m.start) v[m.start] = spans.map((d) => d.start).sort()[0];
      if (spans.length && m.end)
        v[m.end] = spans
          .map((d) => d.end)
          .sort()
          .at(-1);
      return v;
    }
    const t = task.get(row.key)!;
    if (m.parent && row.phase && idOf) v[m.parent] = [idOf(row.phase)];
    if (m.description && t.description) v[m.description] = t.description;
    if (m.estimate && est.has(t.key)) v[m.estimate] = est.get(t.key);
    const d = dates.get(t.key);
    if (d && m.start) v[m.start] = d.start;
    if (d && m.end) v[m.end] = d.end;
    if (m.assignee && t.assignee) v[m.assignee] = t.assignee;
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
    const label =
      typeof r.title === "string"
        ? ` (${JSON.stringify(r.title.length > 60 ? `${r.title.slice(0, 60)}…` : r.title)})`
        : "";
    throw new ToolchainError(ErrorCode.INVALID_INPUT, `record ${i}${label}, field "${c.field}": ${c.message}`, {
      effectStarted: false,
      details: { record: i, field: c.field, table: table.id },
    });
  });
}
