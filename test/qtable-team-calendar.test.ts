/**
 * A planning request with a team and a workspace calendar, through the fallback planner and the
 * runtime on every backend: the split assigns the team, the Gantt takes the calendar's locale
 * without the plan naming it (Whit Monday is never scheduled under DE), books half days, never
 * books one person on two tasks at once (a half-time member takes twice as long), and the
 * approved rows carry the assignees. The calendar rules themselves: pure.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { today, upcomingHolidays, workspaceCalendar } from "../skills/qtable/calendar.js";
import { WorkCalendar, type Gantt } from "../skills/qtable/gantt.js";
import { calendarLines } from "../src/planner/prompt.js";
import { halfDayIndex } from "./helpers/gantt-index.js";
import { silentLogger } from "../graphs/env.js";
import { executeAttempt } from "../src/kernel/execute-attempt.js";
import { MemoryTableStore, qtableSkills } from "../skills/qtable/index.js";
import { settle, stepOf } from "./helpers/run.js";
import { qtableBackends, type QTableRig } from "./helpers/qtable.js";

const REQUEST =
  "Plan an approval system with e-mail notifications and an audit log, estimate the effort and build a timeline";
const TEAM = [{ name: "ana@example.com" }, { name: "ben@example.com", capacity: 0.5 }, "cy@example.com"];

describe("the workspace calendar", () => {
  test("context.calendar, then the context's top level, then the configuration, then Monday–Friday / intl / UTC", () => {
    expect(workspaceCalendar(undefined, {})).toEqual({
      workdays: [1, 2, 3, 4, 5],
      locale: "intl",
      holidays: [],
      timeZone: "UTC",
    });
    const env = { TOOLCHAIN_HOLIDAY_LOCALE: "gb", TOOLCHAIN_WORKDAYS: "1,2,3,4", TOOLCHAIN_TIMEZONE: "Europe/London" };
    expect(workspaceCalendar({}, env)).toEqual({
      workdays: [1, 2, 3, 4],
      locale: "GB",
      holidays: [],
      timeZone: "Europe/London",
    });
    expect(
      workspaceCalendar(
        {
          calendar: { locale: "DE", workdays: [1, 2, 3, 4, 5, 6], timezone: "Europe/Berlin" },
          holidays: ["2027-05-11", "not a date"],
        },
        env,
      ),
    ).toEqual({ workdays: [1, 2, 3, 4, 5, 6], locale: "DE", holidays: ["2027-05-11"], timeZone: "Europe/Berlin" });
    expect(() => workspaceCalendar({}, { TOOLCHAIN_WORKDAYS: "mon-fri" })).toThrow(
      'TOOLCHAIN_WORKDAYS must list ISO weekdays 1 (Monday) to 7 (Sunday), e.g. "1,2,3,4,5", got "mon-fri"',
    );
    expect(() => workspaceCalendar({}, { TOOLCHAIN_TIMEZONE: "Mars/Olympus" })).toThrow(
      'TOOLCHAIN_TIMEZONE must be an IANA time zone (e.g. Europe/Berlin), got "Mars/Olympus"',
    );
    expect(() => workspaceCalendar({}, { TOOLCHAIN_HOLIDAY_LOCALE: "XX" })).toThrow(/TOOLCHAIN_HOLIDAY_LOCALE/);
    expect(today(Date.parse("2027-05-09T23:30:00Z"), "Europe/Berlin")).toEqual({
      date: "2027-05-10",
      weekday: "Monday",
    });
    expect(upcomingHolidays("DE", "2027-05-10", 30)).toEqual(["2027-05-17"]);
  });

  test("the Gantt takes what its arguments leave out from the workspace calendar: today as the start, the locale, the team's capacities", async () => {
    const gantt = qtableSkills({ store: new MemoryTableStore() }).find((x) => x.name === "qtable.gantt.generate")!;
    const r = await executeAttempt({
      skill: gantt,
      args: { tasks: [{ key: "a", title: "Design it", assignee: "ben" }], estimates: [{ key: "a", days: 1 }] },
      runId: "r",
      stepId: "g",
      attempt: 1,
      idempotencyKey: "r:g",
      context: { calendar: { locale: "US", timezone: "America/New_York" }, team: [{ name: "ben", capacity: 0.5 }] },
      workspaceId: "w",
      logger: silentLogger,
      signal: new AbortController().signal,
    });
    expect(r).toMatchObject({ ok: true, output: { calendar: { locale: "US" }, items: [{ key: "a", days: 2 }] } });
    const start = (r as { output: Gantt }).output.items[0]!.start;
    expect(start >= today(Date.now(), "America/New_York").date).toBe(true);
  });

  test("the planner's prompt: today in the calendar's zone, the working days, the locale's coming holidays, the team's own", () => {
    const lines = calendarLines(Date.parse("2027-05-09T23:30:00Z"), {
      calendar: { locale: "DE", timezone: "Europe/Berlin", holidays: ["2027-05-11"] },
    });
    expect(lines).toEqual([
      "Today is Monday, 2027-05-10 (Europe/Berlin).",
      "Working days (ISO weekdays, 1 = Monday): [1,2,3,4,5].",
      'Public holidays (locale DE) in the next 120 days: ["2027-05-17"]; the Gantt skips them by itself.',
      'Holidays: ["2027-05-11"].',
    ]);
  });
});

describe.each(qtableBackends)("a team and a calendar on $name", ({ open }) => {
  let rig: QTableRig;
  beforeAll(async () => {
    rig = await open();
  });
  afterAll(() => rig?.close());

  test("assigned, levelled, on the DE calendar in half days; the approved rows carry the assignees", async () => {
    const ws = "ws-team";
    const table = await rig.store.ensureWorkspace(ws);
    const context = { table: { id: table.id }, team: TEAM, calendar: { locale: "DE" }, startDate: "2027-05-10" };
    const first = await settle(rig.runtime.runRequest(REQUEST, { workspaceId: ws, context }));
    expect(first.view.status).toBe("waiting_confirmation");
    const split = stepOf(first.view, "split").output as { tasks: { key: string; assignee?: string }[] };
    const names = ["ana@example.com", "ben@example.com", "cy@example.com"];
    for (const t of split.tasks) expect(names).toContain(t.assignee);
    expect(new Set(split.tasks.map((t) => t.assignee)).size).toBe(3);

    const gantt = stepOf(first.view, "gantt").output as Gantt;
    expect(gantt.calendar.locale).toBe("DE");
    const h = halfDayIndex(new WorkCalendar("2027-05-10", [1, 2, 3, 4, 5], [], "DE"), 200);
    for (const it of gantt.items) {
      expect([it.start, it.end]).not.toContain("2027-05-17"); // Whit Monday
      expect(it.assignee).toBe(split.tasks.find((t) => t.key === it.key)!.assignee);
    }
    for (const a of gantt.items)
      for (const b of gantt.items)
        if (a.key < b.key && a.assignee === b.assignee)
          expect(h.end(a) < h.start(b) || h.end(b) < h.start(a)).toBe(true);
    // ben gives half days: his tasks take twice their estimate
    const est = stepOf(first.view, "estimate").output as { estimates: { key: string; days: number }[] };
    for (const it of gantt.items.filter((i) => i.assignee === "ben@example.com"))
      expect(it.days).toBe(est.estimates.find((e) => e.key === it.key)!.days * 2);

    // the confirmation shows the timeline itself
    const preview = first.view.pendingConfirmations[0]!.preview as { timeline: { items: { key: string }[] } };
    expect(preview.timeline.items.map((i) => i.key)).toEqual(split.tasks.map((t) => t.key));
    const done = await settle(await rig.runtime.confirm(first.view.runId, { stepId: "create", decision: "approve" }));
    expect(done.view.status).toBe("completed");
    const rows = (await rig.store.listRecords(ws, table.id, { limit: 100 }))!.records;
    // the tasks' rows carry their assignees (a phase row has none)
    const tasksRows = rows.filter((r) => split.tasks.some((t) => t.key === r.values.key));
    expect(tasksRows.map((r) => [r.values.key, r.values.assignee])).toEqual(
      split.tasks.map((t) => [t.key, t.assignee]),
    );
    expect(rows.some((r) => (r.values.estimateDays as number) % 1 === 0.5)).toBe(true);
  });
});
