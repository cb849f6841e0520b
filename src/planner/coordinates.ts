/**
 * The context's business coordinates: which table a request is about. A context names it as
 * `{ table: { id } }`, `{ table: "tbl_…" }` or `{ tableId: "tbl_…" }`; the plan reads it back
 * through a `$ref` to the same path, so the plan stays data over the run's context.
 */
import type { BusinessCoordinates } from "./prompt.js";

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const nonEmpty = (v: unknown): v is string => typeof v === "string" && v.trim() !== "";

export function businessCoordinates(context: unknown): BusinessCoordinates {
  if (!isObject(context)) return {};
  const t = context.table;
  if (isObject(t) && nonEmpty(t.id)) {
    const schema = t.fields !== undefined ? { fields: t.fields } : t.schema;
    return {
      table: {
        id: t.id,
        ref: "context.table.id",
        ...(nonEmpty(t.name) ? { name: t.name } : {}),
        ...(schema !== undefined ? { schema } : {}),
      },
    };
  }
  if (nonEmpty(t)) return { table: { id: t, ref: "context.table" } };
  if (nonEmpty(context.tableId)) return { table: { id: context.tableId, ref: "context.tableId" } };
  return {};
}
