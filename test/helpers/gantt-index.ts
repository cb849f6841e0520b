/** Gantt items as half-day indices on their calendar (0 = the first working morning), for property checks. */
import type { GanttItem } from "../../skills/qtable/gantt.js";
import { WorkCalendar } from "../../skills/qtable/gantt.js";

export function halfDayIndex(cal: WorkCalendar, days = 500) {
  const idx = new Map<string, number>();
  for (let i = 0; i < days; i++) idx.set(cal.date(i), i);
  const day = (d: string) => {
    const i = idx.get(d);
    if (i === undefined) throw new Error(`${d} is not a working day of the calendar`);
    return i;
  };
  return {
    isWorkday: (d: string) => idx.has(d),
    /** The first half day the item occupies. */
    start: (it: GanttItem) => 2 * day(it.start) + (it.startsAtMidday ? 1 : 0),
    /** The last half day it occupies (inclusive). */
    end: (it: GanttItem) => 2 * day(it.end) + (it.endsAtMidday ? 0 : 1),
  };
}
