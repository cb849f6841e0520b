/**
 * The Gantt schedule, pure: tasks with dependencies and estimates on a working-day calendar.
 *
 * - dates are `YYYY-MM-DD`; `end` is inclusive (a 1-day task starts and ends the same day);
 * - `workdays` are ISO weekday numbers (1 = Monday … 7 = Sunday), default Monday–Friday;
 *   `holidays` are skipped;
 * - time is booked in **half days** (a working day is a morning and an afternoon): 2.5 days from
 *   a Monday morning end on Wednesday at midday (`endsAtMidday`), and the next task starts that
 *   afternoon (`startsAtMidday`); other fractions round up to the next half day, as the
 *   estimate's `days` do;
 * - `holidays` are a team's own dates, added to the built-in public holidays of `locale`
 *   (holidays.ts; default "intl": New Year's Day and Christmas Day; "none" turns them off);
 * - dependencies: a task's `dependsOn` are finish-to-start; `links` add or replace them with
 *   start-to-start (SS), finish-to-finish (FF) or finish-to-start (FS), each with a lag in
 *   working days (half days allowed; negative: a lead);
 * - `milestones` are tasks of no duration (no estimate needed): dated on the working day their
 *   predecessors finish;
 * - **resource levelling** (gantt-level.ts): a task's `assignee` works on one task at a time, at
 *   their `capacity` (a share of a working day: 0.5 takes twice as long); a task waiting for its
 *   assignee names the task it waits for (`waitsFor`), and that wait counts as a dependency for
 *   slack and the critical chains;
 * - a task starts as early as its links, its assignee and `startDate` allow;
 * - `criticalPaths`: every tied zero-slack chain from a first start to `finish` (tight links
 *   only), in order; `criticalPath` is the first of them.
 *
 * Scheduling happens on half-day indices (0 = the morning of the first working day on/after
 * startDate), so weekends and holidays only matter when indices are turned into dates.
 */
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { isIsoDate } from "./fields.js";
import { levelSchedule, type Edge } from "./gantt-level.js";
import { defaultHolidayLocale, HolidaySet, type HolidayLocale } from "./holidays.js";

export interface GanttTask {
  key: string;
  title?: string;
  dependsOn?: string[];
  /** Who does it: never booked on two tasks at once. */
  assignee?: string;
}
export interface GanttAssignee {
  name: string;
  /** Share of a working day they give (0 < capacity ≤ 1). @default 1 */
  capacity?: number;
}
export interface GanttEstimate {
  key: string;
  days: number;
}
export type LinkType = "FS" | "SS" | "FF";
export interface GanttLink {
  /** The predecessor. */
  from: string;
  /** The successor. */
  to: string;
  type: LinkType;
  /** Working days between the predecessor's start/finish and the successor's; negative: a lead. */
  lag?: number;
}
export interface GanttInput {
  tasks: GanttTask[];
  estimates: GanttEstimate[];
  startDate: string;
  workdays?: number[];
  holidays?: string[];
  locale?: HolidayLocale;
  links?: GanttLink[];
  milestones?: string[];
  /** Capacities of the tasks' assignees (an assignee not listed has capacity 1). */
  assignees?: GanttAssignee[];
}
export interface GanttItem {
  key: string;
  start: string;
  end: string;
  /** Starts in the afternoon of `start`. */
  startsAtMidday?: true;
  /** Ends at midday of `end`. */
  endsAtMidday?: true;
  /** Working days booked (half days). */
  days: number;
  /** Working days this task can slip without moving `finish` (half days). */
  slack: number;
  milestone?: boolean;
  assignee?: string;
  /** The task its assignee finishes first (resource levelling moved this one after it). */
  waitsFor?: string;
}
export interface Gantt {
  items: GanttItem[];
  criticalPath: string[];
  /** Every tied critical chain (at most MAX_CHAINS). */
  criticalPaths: string[][];
  finish: string;
  /** The calendar the dates are on: working weekdays, the holiday locale, the team's own dates. */
  calendar: { workdays: number[]; locale: HolidayLocale; holidays: string[] };
}

/** Longest calendar scan before we call the input unschedulable (about 270 years). */
const MAX_CALENDAR_DAYS = 100_000;
/** Tied critical chains reported at most (a grid of ties has exponentially many). */
export const MAX_CHAINS = 50;

/** Half days per working day: the schedule's unit. */
export const HALVES = 2;

const invalid = (message: string, details?: unknown) =>
  new ToolchainError(ErrorCode.INVALID_INPUT, message, { details, effectStarted: false });

/** Order tasks so dependencies come first; throws INVALID_INPUT naming dangling dependencies or a cycle. */
export function orderTasks(tasks: readonly GanttTask[], links: readonly GanttLink[] = []): string[] {
  const keys = new Set<string>();
  for (const t of tasks) {
    if (keys.has(t.key)) throw invalid(`duplicate task key "${t.key}"`, { duplicate: t.key });
    keys.add(t.key);
  }
  const dangling = tasks.flatMap((t) => (t.dependsOn ?? []).filter((d) => !keys.has(d)).map((d) => `${t.key} -> ${d}`));
  if (dangling.length) throw invalid(`tasks depend on unknown tasks: ${dangling.join(", ")}`, { dangling });
  const badLink = links.flatMap((l) =>
    [l.from, l.to].filter((k) => !keys.has(k)).map((k) => `${l.from} -${l.type}-> ${l.to}`),
  );
  if (badLink.length)
    throw invalid(`links name unknown tasks: ${[...new Set(badLink)].join(", ")}`, { dangling: badLink });
  const deps = new Map(tasks.map((t) => [t.key, [...new Set(t.dependsOn ?? [])]]));
  for (const l of links) if (!deps.get(l.to)!.includes(l.from)) deps.get(l.to)!.push(l.from);
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
  private readonly holidays: HolidaySet;
  private cursor: Date;
  private scanned = 0;

  constructor(
    startDate: string,
    workdays: readonly number[] = [1, 2, 3, 4, 5],
    holidays: readonly string[] = [],
    locale: HolidayLocale = "none",
  ) {
    if (!isIsoDate(startDate))
      throw invalid(`startDate must be a calendar date YYYY-MM-DD, got ${JSON.stringify(startDate)}`);
    const bad = workdays.find((d) => !Number.isInteger(d) || d < 1 || d > 7);
    if (bad !== undefined) throw invalid(`workdays are ISO weekday numbers 1 (Monday) to 7 (Sunday), got ${bad}`);
    if (!workdays.length) throw invalid("workdays must name at least one weekday");
    const badHoliday = holidays.find((h) => !isIsoDate(h));
    if (badHoliday !== undefined) throw invalid(`holidays must be dates YYYY-MM-DD, got ${JSON.stringify(badHoliday)}`);
    this.workdays = new Set(workdays);
    this.holidays = new HolidaySet(locale, new Set(holidays));
    this.cursor = new Date(`${startDate}T00:00:00Z`);
  }

  /** Whether `iso` is a working day of this calendar. */
  isWorkday(iso: string): boolean {
    const weekday = ((new Date(`${iso}T00:00:00Z`).getUTCDay() + 6) % 7) + 1; // Sunday 0 -> 7
    return this.workdays.has(weekday) && !this.holidays.has(iso);
  }

  /** The date of working day `i` (0-based). */
  date(i: number): string {
    while (this.days.length <= i) {
      if (++this.scanned > MAX_CALENDAR_DAYS)
        throw invalid("the schedule does not fit the calendar (too many holidays or days)");
      const iso = this.cursor.toISOString().slice(0, 10);
      if (this.isWorkday(iso)) this.days.push(iso);
      this.cursor = new Date(this.cursor.getTime() + 86_400_000);
    }
    return this.days[i]!;
  }
}

/**
 * The earliest start a link allows its successor `d` days long (indices: es = first day, ef = last
 * day inclusive; a milestone has d = 0, so ef = es - 1, "reached at the end of day es - 1").
 */
function boundFrom(e: Edge, es: ReadonlyMap<string, number>, ef: ReadonlyMap<string, number>, d: number): number {
  if (e.type === "SS") return es.get(e.from)! + e.lag;
  if (e.type === "FF") return ef.get(e.from)! + e.lag - d + 1;
  return ef.get(e.from)! + 1 + e.lag;
}

export function generateGantt(input: GanttInput): Gantt {
  const links = input.links ?? [];
  const order = orderTasks(input.tasks, links);
  if (!input.tasks.length) throw invalid("tasks must not be empty");
  const keys = new Set(input.tasks.map((t) => t.key));
  const milestones = new Set(input.milestones ?? []);
  const unknownMs = [...milestones].filter((k) => !keys.has(k));
  if (unknownMs.length)
    throw invalid(`milestones name unknown tasks: ${unknownMs.join(", ")}`, { unknownMilestones: unknownMs });
  const est = new Map<string, number>();
  for (const e of input.estimates) {
    // two estimates of one task: which one is meant cannot be guessed
    if (est.has(e.key)) throw invalid(`duplicate estimates for task "${e.key}"`, { duplicateEstimate: e.key });
    if (!(Number.isFinite(e.days) && e.days > 0))
      throw invalid(`estimate of task "${e.key}" must be a positive number of days, got ${e.days}`);
    est.set(e.key, e.days);
  }
  const unknownEst = input.estimates.filter((e) => !keys.has(e.key)).map((e) => e.key);
  if (unknownEst.length)
    throw invalid(`estimates for unknown tasks: ${unknownEst.join(", ")}`, { unknownEstimates: unknownEst });
  const missing = input.tasks.filter((t) => !est.has(t.key) && !milestones.has(t.key)).map((t) => t.key);
  if (missing.length) throw invalid(`tasks without an estimate: ${missing.join(", ")}`, { missingEstimates: missing });
  const seenLink = new Set<string>();
  for (const l of links) {
    if (l.from === l.to) throw invalid(`a link cannot join task "${l.from}" to itself`);
    const id = `${l.from}\u0000${l.to}`;
    if (seenLink.has(id)) throw invalid(`two links from "${l.from}" to "${l.to}"`);
    seenLink.add(id);
  }
  const locale = input.locale ?? defaultHolidayLocale();
  const workdays = input.workdays ?? [1, 2, 3, 4, 5];
  const cal = new WorkCalendar(input.startDate, workdays, input.holidays, locale);
  const capacity = capacities(input);

  // incoming edges (half-day lags): dependsOn are FS lag 0 unless a link for the same pair says otherwise
  const incoming = new Map<string, Edge[]>(input.tasks.map((t) => [t.key, []]));
  const linkFor = new Map(links.map((l) => [`${l.from}\u0000${l.to}`, l]));
  for (const t of input.tasks)
    for (const d of new Set(t.dependsOn ?? []))
      if (!linkFor.has(`${d}\u0000${t.key}`)) incoming.get(t.key)!.push({ from: d, type: "FS", lag: 0 });
  for (const l of links)
    incoming.get(l.to)!.push({ from: l.from, type: l.type, lag: Math.round((l.lag ?? 0) * HALVES) });
  // effort in half days, stretched by the assignee's capacity
  const dur = new Map(
    input.tasks.map((t) => [
      t.key,
      milestones.has(t.key)
        ? 0
        : Math.max(1, Math.ceil((est.get(t.key)! * HALVES) / (t.assignee ? capacity(t.assignee) : 1) - 1e-9)),
    ]),
  );

  // forward pass on half-day indices, one assignee on one task at a time
  const lv = levelSchedule(input.tasks, order, incoming, dur, boundFrom);
  const { es, ef, waitsFor } = lv;
  for (const [k, blocker] of waitsFor) incoming.get(k)!.push({ from: blocker, type: "FS", lag: 0 });
  const placed = lv.order;
  const last = Math.max(...ef.values()); // -1 when only milestones at the start
  // backward pass: latest finish without moving `last` (the same difference constraints, reversed)
  const outgoing = new Map<string, { to: string; e: Edge }[]>(input.tasks.map((t) => [t.key, []]));
  for (const [to, es_] of incoming) for (const e of es_) outgoing.get(e.from)!.push({ to, e });
  const lf = new Map<string, number>();
  for (const k of [...placed].reverse()) {
    const d = dur.get(k)!;
    const bounds = outgoing.get(k)!.map(({ to, e }) => {
      const ls = lf.get(to)! - dur.get(to)! + 1;
      if (e.type === "SS") return ls - e.lag + d - 1;
      if (e.type === "FF") return lf.get(to)! - e.lag;
      return ls - 1 - e.lag;
    });
    lf.set(k, Math.min(last, ...bounds));
  }
  const slack = (k: string) => lf.get(k)! - ef.get(k)!;

  // critical chains: zero-slack tasks joined by tight links, from one no tight link drives to one ending at `last`
  const position = new Map(input.tasks.map((t, i) => [t.key, i]));
  const byInputOrder = (a: string, b: string) => position.get(a)! - position.get(b)!;
  const critical = (k: string) => slack(k) === 0;
  const tightPreds = (k: string) =>
    incoming
      .get(k)!
      .filter((e) => critical(e.from) && boundFrom(e, es, ef, dur.get(k)!) === es.get(k))
      .map((e) => e.from)
      .sort(byInputOrder);
  const chains: string[][] = [];
  const walk = (k: string, tail: string[]) => {
    if (chains.length >= MAX_CHAINS) return;
    const preds = tightPreds(k).filter((p) => !tail.includes(p));
    if (!preds.length) chains.push([k, ...tail]);
    for (const p of preds) walk(p, [k, ...tail]);
  };
  for (const k of input.tasks
    .map((t) => t.key)
    .filter((x) => critical(x) && ef.get(x) === last)
    .sort(byInputOrder))
    walk(k, []);
  chains.sort((a, b) => {
    for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return byInputOrder(a[i]!, b[i]!);
    return a.length - b.length;
  });

  // half-day index → the working day it falls on
  const dayOf = (u: number) => cal.date(Math.floor(Math.max(0, u) / HALVES));
  return {
    items: input.tasks.map((t) => {
      const m = milestones.has(t.key);
      const s0 = es.get(t.key)!;
      const e0 = ef.get(t.key)!;
      // a milestone is dated on the day its predecessors finish (the half day before its index)
      const start = m ? dayOf(s0 - 1) : dayOf(s0);
      return {
        key: t.key,
        start,
        end: m ? start : dayOf(e0),
        ...(!m && s0 % HALVES === 1 ? { startsAtMidday: true as const } : {}),
        ...(!m && e0 % HALVES === 0 ? { endsAtMidday: true as const } : {}),
        days: dur.get(t.key)! / HALVES,
        slack: slack(t.key) / HALVES,
        ...(m ? { milestone: true } : {}),
        ...(t.assignee ? { assignee: t.assignee } : {}),
        ...(waitsFor.has(t.key) ? { waitsFor: waitsFor.get(t.key)! } : {}),
      };
    }),
    criticalPath: chains[0] ?? [],
    criticalPaths: chains,
    finish: dayOf(last),
    calendar: { workdays: [...workdays], locale, holidays: [...(input.holidays ?? [])] },
  };
}

/** Each assignee's capacity (validated): a share of a working day, 1 unless listed. */
function capacities(input: GanttInput): (name: string) => number {
  const caps = new Map<string, number>();
  for (const a of input.assignees ?? []) {
    if (caps.has(a.name)) throw invalid(`assignee "${a.name}" is listed twice`, { field: "assignees" });
    const c = a.capacity ?? 1;
    if (!(Number.isFinite(c) && c > 0 && c <= 1))
      throw invalid(`capacity of assignee "${a.name}" must be a share of a day in (0, 1], got ${c}`, {
        field: "assignees",
      });
    caps.set(a.name, c);
  }
  return (name) => caps.get(name) ?? 1;
}
