/**
 * Table schemas and record values: the pure rules both stores and the skills share. A table has
 * typed fields; a record is a map from field name to a value of that field's type. Validation
 * names the record and the field, so a plan cannot write garbage into a table.
 */
import { z } from "zod";

export const FIELD_TYPES = ["text", "number", "date", "select", "user", "relation"] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

export const FIELD_NAME = /^[A-Za-z][A-Za-z0-9_]{0,63}$/;

// eslint-disable-next-line no-control-regex
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
/** Names and options are Postgres text: no NUL, no lone surrogate (refused here, not by the database). */
const storableText = (s: z.ZodString) =>
  s.refine((v) => !UNSTORABLE.test(v), "must not contain the NUL character or a lone UTF-16 surrogate");
/** Values a record may carry: a JSON scalar or a list of record ids (relation). */
export type FieldValue = string | number | string[] | null;
export type RecordValues = Record<string, FieldValue>;

export const FieldSchema = z
  .object({
    name: z
      .string()
      .regex(FIELD_NAME, `field names match ${FIELD_NAME}`)
      .describe("Unique within the table; also the key of the value in a record."),
    type: z.enum(FIELD_TYPES),
    required: z.boolean().optional().describe("A record must carry a non-empty value."),
    options: z
      .array(storableText(z.string().min(1).max(200)))
      .min(1)
      .max(200)
      .optional()
      .describe("select: the allowed values (required for select, refused otherwise)."),
    tableId: storableText(z.string().min(1).max(64))
      .optional()
      .describe("relation: the related table (records hold arrays of its record ids); absent: this table."),
  })
  .strict()
  .superRefine((f, ctx) => {
    if (f.type === "select" && !f.options)
      ctx.addIssue({ code: "custom", path: ["options"], message: `select field "${f.name}" needs options` });
    if (f.type !== "select" && f.options)
      ctx.addIssue({
        code: "custom",
        path: ["options"],
        message: `only select fields take options (field "${f.name}" is ${f.type})`,
      });
    if (f.options && new Set(f.options).size !== f.options.length)
      ctx.addIssue({ code: "custom", path: ["options"], message: `options of field "${f.name}" must be unique` });
    if (f.type !== "relation" && f.tableId)
      ctx.addIssue({
        code: "custom",
        path: ["tableId"],
        message: `only relation fields take tableId (field "${f.name}" is ${f.type})`,
      });
  });
export type Field = z.infer<typeof FieldSchema>;

export const TableDefinitionSchema = z
  .object({
    name: storableText(z.string().trim().min(1).max(100)),
    fields: z
      .array(FieldSchema)
      .min(1)
      .max(100)
      .superRefine((fields, ctx) => {
        const seen = new Set<string>();
        fields.forEach((f, i) => {
          if (seen.has(f.name))
            ctx.addIssue({ code: "custom", path: [i, "name"], message: `duplicate field name "${f.name}"` });
          seen.add(f.name);
          if (f.name === "id")
            ctx.addIssue({ code: "custom", path: [i, "name"], message: `"id" is reserved for the record id` });
        });
      }),
  })
  .strict();
export type TableDefinition = z.infer<typeof TableDefinitionSchema>;

export interface Table {
  id: string;
  name: string;
  fields: Field[];
}

export interface TableRecord {
  id: string;
  values: RecordValues;
}

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** `YYYY-MM-DD` naming a real calendar day. */
export function isIsoDate(s: string): boolean {
  const m = ISO_DATE.exec(s);
  if (!m) return false;
  const d = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return d.toISOString().slice(0, 10) === s;
}

export type ValueCheck = { ok: true; values: RecordValues } | { ok: false; field: string; message: string };

/**
 * Check one record against the table's fields: unknown fields, required fields, types. Returns
 * the values to store (absent optional fields are left out; null stays null).
 */
export function checkRecord(fields: readonly Field[], raw: Record<string, unknown>): ValueCheck {
  const byName = new Map(fields.map((f) => [f.name, f]));
  for (const k of Object.keys(raw)) {
    if (!byName.has(k))
      return { ok: false, field: k, message: `unknown field "${k}" (fields: ${fields.map((f) => f.name).join(", ")})` };
  }
  const values: RecordValues = {};
  for (const f of fields) {
    const v = Object.hasOwn(raw, f.name) ? raw[f.name] : undefined;
    const empty = v === undefined || v === null || v === "" || (Array.isArray(v) && v.length === 0);
    if (empty) {
      if (f.required) return { ok: false, field: f.name, message: `field "${f.name}" is required` };
      if (v !== undefined) values[f.name] = v === "" ? "" : null;
      continue;
    }
    const bad = checkValue(f, v);
    if (bad) return { ok: false, field: f.name, message: bad };
    values[f.name] = v as FieldValue;
  }
  return { ok: true, values };
}

function checkValue(f: Field, v: unknown): string | undefined {
  switch (f.type) {
    case "text":
      if (typeof v !== "string") return `field "${f.name}" is text: expected a string, got ${describe(v)}`;
      if (v.length > 100_000) return `field "${f.name}" is longer than 100000 characters`;
      if (v.includes("\u0000")) return `field "${f.name}" contains a NUL character`;
      return undefined;
    case "number":
      return typeof v === "number" && Number.isFinite(v)
        ? undefined
        : `field "${f.name}" is a number: expected a finite number, got ${describe(v)}`;
    case "date":
      return typeof v === "string" && isIsoDate(v)
        ? undefined
        : `field "${f.name}" is a date: expected YYYY-MM-DD, got ${describe(v)}`;
    case "select":
      return typeof v === "string" && f.options!.includes(v)
        ? undefined
        : `field "${f.name}" must be one of ${f.options!.map((o) => JSON.stringify(o)).join(", ")}, got ${describe(v)}`;
    case "user":
      return typeof v === "string" && v.length <= 320 && !v.includes("\u0000")
        ? undefined
        : `field "${f.name}" is a user: expected a user id or e-mail string, got ${describe(v)}`;
    case "relation":
      return Array.isArray(v) && v.every((x) => typeof x === "string" && x.length > 0 && x.length <= 64)
        ? undefined
        : `field "${f.name}" is a relation: expected an array of record ids, got ${describe(v)}`;
  }
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (typeof v === "number") return String(v);
  return typeof v;
}

/** The demo table every workspace gets. */
export const TASKS_TABLE: TableDefinition = {
  name: "Tasks",
  fields: [
    { name: "title", type: "text", required: true },
    { name: "description", type: "text" },
    { name: "estimateDays", type: "number" },
    { name: "start", type: "date" },
    { name: "end", type: "date" },
    { name: "status", type: "select", options: ["todo", "doing", "done", "removed"] },
    { name: "dependsOn", type: "relation" },
    { name: "assignee", type: "user" },
    { name: "key", type: "text" },
    { name: "parent", type: "relation" },
    { name: "goal", type: "text" },
  ],
};
