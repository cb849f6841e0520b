/**
 * The Gantt schedule, pure: tasks with dependencies and estimates on a working-day calendar.
 *
 * - dates are `YYYY-MM-DD`; `end` is inclusive (a 1-day task starts and ends the same day);
 * - `workdays` are ISO weekday numbers (1 = Monday … 7 = Sunday), default Monday–Friday;
 *   `holidays` are skipped;
 * - fractional days book whole working days (rounded up);
 * - a task starts on the first working day on/after `startDate` and after its last dependency ends;
 * - `criticalPath`: the zero-slack chain from a first start to `finish`, in order.
 *
 * Scheduling happens on working-day indices (0 = the first working day on/after startDate), so
 * weekends and holidays only matter when indices are turned into dates.
 */
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { isIsoDate } from "./fields.js";

export interface GanttTask {
  key: string;
  title?: string;
  dependsOn?: string[];
}
export interface GanttEstimate {
  key: string;
  days: number;
}
export interface GanttInput {
  tasks: GanttTask[];
  estimates: GanttEstimate[];
  startDate: string;
  workdays?: number[];
  holidays?: string[];
}
export interface GanttItem {
  key: string;
  start: string;
  end: string;
  /** Working days booked. */
  days: number;
  /** Working days this task can slip without moving `finish`. */
  slack: number;
}
export interface Gantt {
  items: GanttItem[];
  criticalPath: string[];
  finish: string;
}

/** Longest calendar scan before we call the input unschedulable (about 270 years). */
const MAX_CALENDAR_DAYS = 100_000;

const invalid = (message: string, details?: unknown) => new ToolchainError(ErrorCode.INVALID_INPUT, message, { details, effectStarted: false });

/** Order tasks so dependencies come first; throws INVALID_INPUT naming dangling dependencies or a cycle. */
export function orderTasks(tasks: readonly GanttTask[]): string[] {
  const keys = new Set<string>();
  for (const t of tasks) {
    if (keys.has(t.key)) throw invalid(`duplicate task key "${t.key}"`, { duplicate: t.key });
    keys.add(t.key);
  }
  const dangling = tasks.flatMap((t) => (t.dependsOn ?? []).filter((d) => !keys.has(d)).map((d) => `${t.key} -> ${d}`));
  if (dangling.length) throw invalid(`tasks depend on unknown tasks: ${dangling.join(", ")}`, { dangling });
  const deps = new Map(tasks.map((t) => [t.key, [...new Set(t.dependsOn ?? [])]]));
  // depth-first, so a cycle can be reported as the path that closes it
  const state = new Map<string, "visiting" | "done">();
  const order: string[] = [];
  const visit = (k: string, path: string[]) => {
    const s = state.get(k);
    if (s === "done") return;
    if (s === "visiting") {
      const cycle = [...path.slice(path.indexOf(k)), k];
      throw invalid(`task dependencies have a cycle: ${cycle.join(" -> ")}`, { cycle });
    }
    state.set(k, "visiting");
    for (const d of deps.get(k)!) visit(d, [...path, k]);
    state.set(k, "done");
    order.push(k);
  };
  for (const t of tasks) visit(t.key, []);
  return order;
}

/** Working-day calendar from a start date: index ↔ date. */
export class WorkCalendar {
  private readonly days: string[] = [];
  private readonly workdays: ReadonlySet<number>;
  private readonly holidays: ReadonlySet<string>;
  private cursor: Date;
  private scanned = 0;

  constructor(startDate: string, workdays: readonly number[] = [1, 2, 3, 4, 5], holidays: readonly string[] = []) {
    if (!isIsoDate(startDate)) throw invalid(`startDate must be a calendar date YYYY-MM-DD, got ${JSON.stringify(startDate)}`);
    const bad = workdays.find((d) => !Number.isInteger(d) || d < 1 || d > 7);
    if (bad !== undefined) throw invalid(`workdays are ISO weekday numbers 1 (Monday) to 7 (Sunday), got ${bad}`);
    if (!workdays.length) throw invalid("workdays must name at least one weekday");
    const badHoliday = holidays.find((h) => !isIsoDate(h));
    if (badHoliday !== undefined) throw invalid(`holidays must be dates YYYY-MM-DD, got ${JSON.stringify(badHoliday)}`);
    this.workdays = new Set(workdays);
    this.holidays = new Set(holidays);
    this.cursor = new Date(`${startDate}T00:00:00Z`);
  }

  /** The date of working day `i` (0-based). */
  date(i: number): string {
    while (this.days.length <= i) {
      if (++this.scanned > MAX_CALENDAR_DAYS) throw invalid("the schedule does not fit the calendar (too many holidays or days)");
      const iso = this.cursor.toISOString().slice(0, 10);
      const weekday = ((this.cursor.getUTCDay() + 6) % 7) + 1; // Sunday 0 -> 7
      if (this.workdays.has(weekday) && !this.holidays.has(iso)) this.days.push(iso);
      this.cursor = new Date(this.cursor.getTime() + 86_400_000);
    }
    return this.days[i]!;
  }
}

export function generateGantt(input: GanttInput): Gantt {
  const order = orderTasks(input.tasks);
  const est = new Map<string, number>();
  for (const e of input.estimates) {
    if (!(Number.isFinite(e.days) && e.days > 0)) throw invalid(`estimate of task "${e.key}" must be a positive number of days, got ${e.days}`);
    est.set(e.key, e.days);
  }
  const unknownEst = input.estimates.filter((e) => !input.tasks.some((t) => t.key === e.key)).map((e) => e.key);
  if (unknownEst.length) throw invalid(`estimates for unknown tasks: ${unknownEst.join(", ")}`, { unknownEstimates: unknownEst });
  const missing = input.tasks.filter((t) => !est.has(t.key)).map((t) => t.key);
  if (missing.length) throw invalid(`tasks without an estimate: ${missing.join(", ")}`, { missingEstimates: missing });
  const cal = new WorkCalendar(input.startDate, input.workdays, input.holidays);
  if (!input.tasks.length) throw invalid("tasks must not be empty");

  const deps = new Map(input.tasks.map((t) => [t.key, [...new Set(t.dependsOn ?? [])]]));
  const dur = new Map(input.tasks.map((t) => [t.key, Math.max(1, Math.ceil(est.get(t.key)! - 1e-9))]));
  // forward pass on working-day indices: es = first day, ef = last day (inclusive)
  const es = new Map<string, number>();
  const ef = new Map<string, number>();
  for (const k of order) {
    const start = Math.max(0, ...deps.get(k)!.map((d) => ef.get(d)! + 1));
    es.set(k, start);
    ef.set(k, start + dur.get(k)! - 1);
  }
  const last = Math.max(...ef.values());
  // backward pass: latest finish without moving `last`
  const succ = new Map<string, string[]>(input.tasks.map((t) => [t.key, []]));
  for (const [k, ds] of deps) for (const d of ds) succ.get(d)!.push(k);
  const lf = new Map<string, number>();
  for (const k of [...order].reverse()) {
    const s = succ.get(k)!;
    lf.set(k, s.length ? Math.min(...s.map((x) => lf.get(x)! - dur.get(x)!)) : last);
  }
  const slack = (k: string) => lf.get(k)! - ef.get(k)!;

  // the critical chain: from a zero-slack task ending at `last`, walk back through tight dependencies
  const position = new Map(input.tasks.map((t, i) => [t.key, i]));
  const byInputOrder = (a: string, b: string) => position.get(a)! - position.get(b)!;
  const chain: string[] = [];
  let cur: string | undefined = input.tasks.map((t) => t.key).filter((k) => ef.get(k) === last && slack(k) === 0).sort(byInputOrder)[0];
  while (cur !== undefined) {
    chain.push(cur);
    const c: string = cur;
    cur = deps.get(c)!.filter((d) => slack(d) === 0 && ef.get(d)! + 1 === es.get(c)).sort(byInputOrder)[0];
  }
  chain.reverse();

  return {
    items: input.tasks.map((t) => ({ key: t.key, start: cal.date(es.get(t.key)!), end: cal.date(ef.get(t.key)!), days: dur.get(t.key)!, slack: slack(t.key) })),
    criticalPath: chain,
    finish: cal.date(last),
  };
}
