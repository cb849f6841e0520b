/**
 * The records preview's `timeline` (qtable.task.records.create: the Gantt it will write) laid out
 * for a chart, pure: one column per calendar day from the first start to the finish, bars in half
 * days (a task starting or ending at midday covers half its first or last column), days off
 * (weekdays outside `calendar.workdays`, the holidays in `daysOff`) marked, milestones as points.
 * Anything that is not such a timeline gives null: the dialog then shows the preview as it is.
 */

export interface PlanBar {
  key: string;
  title: string;
  /** Columns from the first day, in half-day steps: [x0, x1) of the day grid. */
  x0: number;
  x1: number;
  start: string;
  end: string;
  days: number | null;
  slack: number | null;
  critical: boolean;
  milestone: boolean;
}

export interface PlanGantt {
  /** Every calendar day shown, YYYY-MM-DD. */
  days: string[];
  /** Indexes into `days` that are not worked. */
  off: number[];
  /** Indexes into `days` that start a week (Mondays), for the axis. */
  weeks: number[];
  bars: PlanBar[];
  finish: string;
}

const ISO = /^\d{4}-\d{2}-\d{2}$/;
const DAY = 86_400_000;
/** More days than this are not drawn (a preview of years is a table's job). */
export const PLAN_GANTT_MAX_DAYS = 731;

const dayNo = (d: string) => Date.parse(`${d}T00:00:00Z`) / DAY;
const isoOf = (n: number) => new Date(n * DAY).toISOString().slice(0, 10);

export function planGantt(preview: unknown): PlanGantt | null {
  const t = (preview as { timeline?: unknown } | null)?.timeline as
    | {
        items?: unknown;
        finish?: unknown;
        calendar?: { workdays?: unknown; holidays?: unknown };
        daysOff?: unknown;
      }
    | undefined;
  if (!t || !Array.isArray(t.items) || t.items.length === 0 || typeof t.finish !== "string") return null;
  type Item = Record<string, unknown> & { key: string; start: string; end: string };
  const items = t.items.filter(
    (i): i is Item =>
      typeof i === "object" &&
      i !== null &&
      typeof (i as Item).key === "string" &&
      ISO.test(String((i as Item).start)) &&
      ISO.test(String((i as Item).end)),
  );
  if (!items.length) return null;
  const first = Math.min(...items.map((i) => dayNo(i.start)));
  const last = Math.max(...items.map((i) => dayNo(i.end)));
  if (!Number.isFinite(first) || !Number.isFinite(last) || last - first + 1 > PLAN_GANTT_MAX_DAYS) return null;
  const days = Array.from({ length: last - first + 1 }, (_, i) => isoOf(first + i));
  const workdays = Array.isArray(t.calendar?.workdays) ? (t.calendar!.workdays as unknown[]) : [1, 2, 3, 4, 5];
  // the server lists the span's holidays (the locale's and the team's): a browser cannot compute a locale's
  const holidays = new Set([
    ...(Array.isArray(t.daysOff) ? (t.daysOff as unknown[]) : []),
    ...(Array.isArray(t.calendar?.holidays) ? (t.calendar!.holidays as unknown[]) : []),
  ]);
  const iso = (d: string) => ((new Date(`${d}T00:00:00Z`).getUTCDay() + 6) % 7) + 1;
  const off: number[] = [];
  const weeks: number[] = [];
  days.forEach((d, i) => {
    if (!workdays.includes(iso(d)) || holidays.has(d)) off.push(i);
    if (iso(d) === 1) weeks.push(i);
  });
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : null);
  const bars = items.map((i): PlanBar => {
    const milestone = i.milestone === true;
    const s = dayNo(i.start) - first + (i.startsAtMidday === true ? 0.5 : 0);
    const e = dayNo(i.end) - first + (i.endsAtMidday === true ? 0.5 : 1);
    return {
      key: i.key,
      title: typeof i.title === "string" ? i.title : i.key,
      // a milestone is a point in the middle of its day
      x0: milestone ? dayNo(i.start) - first + 0.5 : s,
      x1: milestone ? dayNo(i.start) - first + 0.5 : Math.max(e, s + 0.5),
      start: i.start,
      end: i.end,
      days: num(i.days),
      slack: num(i.slack),
      critical: i.critical === true,
      milestone,
    };
  });
  return { days, off, weeks, bars, finish: t.finish };
}
