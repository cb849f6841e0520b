/**
 * Three-point estimates from a table's own history: the actual durations of its completed rows
 * whose titles are like the task's (shared words, or the same leading verb with some shared
 * words). Pure over the rows; the skill reads them (task-estimate.ts).
 */
import type { RecordValues } from "./fields.js";
import { fieldMapping } from "./mapping.js";
import type { Table } from "./fields.js";
import { threePoint, verbClass, type ThreePoint } from "./estimate-heuristics.js";

export interface DoneRow {
  title: string;
  /** Actual working days (from start/end, else the estimate the row carried). */
  days: number;
}

const STOP = new Set(["the", "a", "an", "of", "for", "and", "to", "in", "on", "with", "our", "new"]);
const words = (s: string) =>
  new Set(
    s
      .toLowerCase()
      .split(/[^a-z0-9]+/)
      .filter((w) => w.length > 1 && !STOP.has(w)),
  );

export function similarity(a: string, b: string): number {
  const x = words(a);
  const y = words(b);
  if (!x.size || !y.size) return 0;
  let shared = 0;
  for (const w of x) if (y.has(w)) shared++;
  return shared / (x.size + y.size - shared);
}

/** Mon–Fri days from `start` to `end`, both included (history only needs a fair measure). */
function workdaysBetween(start: string, end: string): number {
  const a = Date.parse(`${start}T00:00:00Z`);
  const b = Date.parse(`${end}T00:00:00Z`);
  if (!(b >= a) || b - a > 3_650 * 86_400_000) return 0;
  let n = 0;
  for (let t = a; t <= b; t += 86_400_000) {
    const wd = new Date(t).getUTCDay();
    if (wd !== 0 && wd !== 6) n++;
  }
  return n;
}

const DONE = /^(done|complete[d]?|closed|finished|shipped)$/i;

/** The completed rows of a table with a measurable duration. */
export function completedRows(table: Table, rows: readonly RecordValues[]): DoneRow[] {
  const m = fieldMapping(table);
  if (!m.title || !m.status) return [];
  const out: DoneRow[] = [];
  for (const v of rows) {
    const title = v[m.title];
    const status = v[m.status];
    if (typeof title !== "string" || typeof status !== "string" || !DONE.test(status)) continue;
    const start = m.start ? v[m.start] : undefined;
    const end = m.end ? v[m.end] : undefined;
    const est = m.estimate ? v[m.estimate] : undefined;
    const days =
      typeof start === "string" && typeof end === "string"
        ? workdaysBetween(start, end)
        : typeof est === "number"
          ? est
          : 0;
    if (days > 0) out.push({ title, days });
  }
  return out;
}

/** Rows at least this similar count as the same kind of work. */
const SIMILAR = 0.4;
/** With the same leading verb, less overlap is enough. */
const SIMILAR_SAME_VERB = 0.2;

/** From the (up to 5) most similar completed rows: min / median / max; undefined when none is similar. */
export function historyEstimate(
  task: { key: string; title: string },
  done: readonly DoneRow[],
): (ThreePoint & { basis: string[] }) | undefined {
  const cls = verbClass(task);
  const similar = done
    .map((r) => ({ r, s: similarity(task.title, r.title) }))
    .filter(
      ({ r, s }) =>
        s >= SIMILAR || (cls !== undefined && s >= SIMILAR_SAME_VERB && verbClass({ key: "", title: r.title }) === cls),
    )
    .sort((a, b) => b.s - a.s || a.r.days - b.r.days)
    .slice(0, 5)
    .map(({ r }) => r);
  if (!similar.length) return undefined;
  const d = similar.map((r) => r.days).sort((a, b) => a - b);
  const median = d.length % 2 ? d[(d.length - 1) / 2]! : (d[d.length / 2 - 1]! + d[d.length / 2]!) / 2;
  // one data point says little about the spread: widen it
  const [o, p] = d.length === 1 ? [Math.max(0.5, median * 0.75), median * 1.5] : [d[0]!, d.at(-1)!];
  return {
    ...threePoint(task.key, o, median, p, Math.min(0.9, 0.5 + 0.1 * d.length)),
    basis: similar.map((r) => r.title),
  };
}
