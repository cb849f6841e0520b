/**
 * The confirmation preview's timeline as a text Gantt, pure: one column per calendar day (one per
 * week when the plan is longer than `maxDays`), days off shaded, half days as half blocks,
 * milestones as diamonds, critical tasks marked. Everything from the run is escaped (esc), so a
 * task title cannot drive the terminal.
 *
 *              Mo 21 Dec       Mo 28 Dec
 *   * design   ███▌·······
 *     docs        ▐█··█▌
 */
import { HolidaySet, type HolidayLocale } from "../../skills/qtable/holidays.js";
import { esc } from "./escape.js";

export interface TimelineItem {
  key: string;
  title?: string;
  start: string;
  end: string;
  startsAtMidday?: boolean;
  endsAtMidday?: boolean;
  days?: number;
  slack?: number;
  milestone?: boolean;
  assignee?: string;
  critical?: boolean;
}
export interface Timeline {
  items: TimelineItem[];
  finish: string;
  calendar?: { workdays: number[]; locale: string; holidays: string[] };
}

const DAY = 86_400_000;
const dayNo = (iso: string) => Math.round(Date.parse(`${iso}T00:00:00Z`) / DAY);
const isoOf = (n: number) => new Date(n * DAY).toISOString().slice(0, 10);
const weekday = (n: number) => ((new Date(n * DAY).getUTCDay() + 6) % 7) + 1; // 1 = Monday
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const label = (n: number) => {
  const d = new Date(n * DAY);
  return `${String(d.getUTCDate()).padStart(2, "0")} ${MONTHS[d.getUTCMonth()]}`;
};

export function ganttText(t: Timeline, opts: { maxDays?: number; labelWidth?: number } = {}): string[] {
  if (!t.items.length) return [];
  const maxDays = opts.maxDays ?? 70;
  const first = Math.min(...t.items.map((i) => dayNo(i.start)));
  const last = Math.max(dayNo(t.finish), ...t.items.map((i) => dayNo(i.end)));
  const workdays = new Set(t.calendar?.workdays ?? [1, 2, 3, 4, 5]);
  const holidays = new HolidaySet((t.calendar?.locale ?? "none") as HolidayLocale, new Set(t.calendar?.holidays ?? []));
  const off = (n: number) => !workdays.has(weekday(n)) || holidays.has(isoOf(n));
  const perWeek = last - first + 1 > maxDays;
  const step = perWeek ? 7 : 1;
  const cols = Math.floor((last - first) / step) + 1;
  const lw = Math.min(opts.labelWidth ?? 28, Math.max(4, ...t.items.map((i) => esc(i.key).length)));

  const bar = (i: TimelineItem) => {
    const s = dayNo(i.start);
    const e = dayNo(i.end);
    let out = "";
    for (let c = 0; c < cols; c++) {
      const d0 = first + c * step;
      if (i.milestone) {
        out += s >= d0 && s < d0 + step ? "◆" : perWeek || !off(d0) ? " " : "·";
        continue;
      }
      const inBar = e >= d0 && s < d0 + step;
      if (perWeek) {
        out += inBar ? "█" : " ";
        continue;
      }
      if (!inBar) out += off(d0) ? "·" : " ";
      else if (off(d0)) out += "·";
      else if (d0 === s && i.startsAtMidday) out += "▐";
      else if (d0 === e && i.endsAtMidday) out += "▌";
      else out += "█";
    }
    return out.replace(/\s+$/, "");
  };

  // a date label every Monday (or every 4 weeks per week), where it fits
  let header = "";
  for (let c = 0; c < cols; c++) {
    const d0 = first + c * step;
    const mark = perWeek ? c % 4 === 0 : c === 0 || weekday(d0) === 1;
    if (mark && header.length <= c) header = header.padEnd(c) + label(d0);
  }
  const lines = [
    `${perWeek ? "one column per week" : "one column per day"}; █ work, ▌▐ half a day, · day off, ◆ milestone, * critical; finish ${esc(t.finish)}`,
    `${" ".repeat(lw + 4)}${header}`,
  ];
  for (const i of t.items) {
    const key = esc(i.key);
    const who = i.assignee ? `  ${esc(i.assignee)}` : "";
    const days = i.milestone ? "" : i.days !== undefined ? `  ${i.days}d` : "";
    lines.push(
      `${i.critical ? "*" : " "} ${(key.length > lw ? `${key.slice(0, lw - 1)}…` : key).padEnd(lw)}  ${bar(i)}${days}${who}`,
    );
  }
  return lines;
}
