/**
 * Finds the lists of records inside a value (a preview such as `{ records: [...] }`, a step's
 * output) so they can be shown as tables: any array of plain objects, at the top or nested up to
 * a few levels in objects. Pure; the view renders cells as text.
 */

export interface RecordTable {
  /** Where the list is: "" for the value itself, else a dotted path such as "records". */
  path: string;
  columns: string[];
  rows: Record<string, unknown>[];
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** An array with at least one element, all of them plain objects. */
export function isRecordList(v: unknown): v is Record<string, unknown>[] {
  return Array.isArray(v) && v.length > 0 && v.every(isPlainObject);
}

/** Columns in first-seen order across all rows. */
export function columnsOf(rows: readonly Record<string, unknown>[]): string[] {
  const seen = new Set<string>();
  for (const r of rows) for (const k of Object.keys(r)) seen.add(k);
  return [...seen];
}

export function recordTables(value: unknown, maxDepth = 3): RecordTable[] {
  const out: RecordTable[] = [];
  const walk = (v: unknown, path: string, depth: number) => {
    if (isRecordList(v)) {
      out.push({ path, columns: columnsOf(v), rows: v });
      return;
    }
    if (!isPlainObject(v) || depth >= maxDepth) return;
    for (const [k, x] of Object.entries(v)) walk(x, path ? `${path}.${k}` : k, depth + 1);
  };
  walk(value, "", 0);
  return out;
}

/** A cell's text: scalars as themselves, anything else as compact JSON. */
export function cellText(v: unknown): string {
  if (v === null || v === undefined) return "";
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  try {
    return JSON.stringify(v);
  } catch {
    return String(v);
  }
}
