/**
 * The calendar and the Gantt beyond finish-to-start: built-in holidays per locale (Christmas Day
 * is never scheduled by default), a team's own dates, SS / FF / FS links with lags, milestones,
 * duplicate estimates refused, and every tied critical chain reported. Properties on random
 * task graphs with random links, lags, locales and holidays.
 */
import { describe, expect, test } from "vitest";
import fc from "fast-check";
import { generateGantt, WorkCalendar, type GanttLink } from "../skills/qtable/gantt.js";
import { halfDayIndex } from "./helpers/gantt-index.js";
import { easterSunday, holidaysOf, HOLIDAY_LOCALES, type HolidayLocale } from "../skills/qtable/holidays.js";

const err = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return { code: (e as { code: string }).code, message: (e as Error).message };
  }
  return undefined;
};

describe("holidays", () => {
  test("Easter and the locales' days, hand-checked", () => {
    expect([2024, 2025, 2026, 2027].map(easterSunday)).toEqual([
      "2024-03-31",
      "2025-04-20",
      "2026-04-05",
      "2027-03-28",
    ]);
    expect(holidaysOf("intl", 2026)).toEqual(["2026-01-01", "2026-12-25"]);
    expect(holidaysOf("US", 2026)).toEqual([
      "2026-01-01",
      "2026-01-19",
      "2026-02-16",
      "2026-05-25",
      "2026-06-19",
      "2026-07-04",
      "2026-09-07",
      "2026-11-11",
      "2026-11-26",
      "2026-12-25",
    ]);
    expect(holidaysOf("GB", 2026)).toEqual([
      "2026-01-01",
      "2026-04-03",
      "2026-04-06",
      "2026-05-04",
      "2026-05-25",
      "2026-08-31",
      "2026-12-25",
      "2026-12-26",
    ]);
    expect(holidaysOf("DE", 2026)).toContain("2026-05-14"); // Ascension Day
    expect(holidaysOf("CA", 2026)).toContain("2026-05-18"); // Victoria Day
    expect(holidaysOf("none", 2026)).toEqual([]);
    for (const l of HOLIDAY_LOCALES.filter((x) => x !== "none")) expect(holidaysOf(l, 2030)).toContain("2030-12-25");
  });

  test("by default Christmas Day and New Year's Day are skipped; a locale and the team's own dates add to them", () => {
    const one = (extra: object) =>
      generateGantt({ tasks: [{ key: "x" }], estimates: [{ key: "x", days: 4 }], startDate: "2026-12-24", ...extra })
        .items[0];
    // Thu 24, (Fri 25 Christmas), Mon 28, Tue 29, Wed 30
    expect(one({})).toMatchObject({ start: "2026-12-24", end: "2026-12-30" });
    // GB: Boxing Day is a Saturday anyway; the team also takes the 24th off
    expect(one({ locale: "GB", holidays: ["2026-12-24"] })).toMatchObject({ start: "2026-12-28", end: "2026-12-31" });
    // across New Year: Thu 31, (Fri 1 Jan), Mon 4
    expect(
      generateGantt({ tasks: [{ key: "x" }], estimates: [{ key: "x", days: 2 }], startDate: "2026-12-31" }).items[0],
    ).toMatchObject({ end: "2027-01-04" });
    expect(one({ locale: "none" })).toMatchObject({ end: "2026-12-29" });
    const g = generateGantt({
      tasks: [{ key: "x" }],
      estimates: [{ key: "x", days: 1 }],
      startDate: "2026-12-24",
      locale: "US",
      holidays: ["2026-12-31"],
    });
    expect(g.calendar).toEqual({ workdays: [1, 2, 3, 4, 5], locale: "US", holidays: ["2026-12-31"] });
  });
});

describe("links, milestones, ties", () => {
  const est = (...pairs: [string, number][]) => pairs.map(([key, days]) => ({ key, days }));

  test("SS and FF with lags, FS with a lead, hand-checked on Mon 2027-03-01 (no holidays that week)", () => {
    const tasks = [{ key: "a" }, { key: "b" }, { key: "c" }, { key: "d" }];
    const links: GanttLink[] = [
      { from: "a", to: "b", type: "SS", lag: 2 }, // b starts 2 days after a starts: Wed 3
      { from: "a", to: "c", type: "FF", lag: 1 }, // c (2 days) finishes 1 day after a (5 days, Fri 5) finishes: Mon 8 → starts Fri 5
      { from: "b", to: "d", type: "FS", lag: -1 }, // d starts the day b (1 day, Wed 3) finishes: Wed 3
    ];
    const g = generateGantt({
      tasks,
      estimates: est(["a", 5], ["b", 1], ["c", 2], ["d", 1]),
      startDate: "2027-03-01",
      links,
    });
    expect(g.items.map((i) => [i.key, i.start, i.end])).toEqual([
      ["a", "2027-03-01", "2027-03-05"],
      ["b", "2027-03-03", "2027-03-03"],
      ["c", "2027-03-05", "2027-03-08"],
      ["d", "2027-03-03", "2027-03-03"],
    ]);
    expect(g.finish).toBe("2027-03-08");
    expect(g.criticalPaths).toEqual([["a", "c"]]);
  });

  test("a milestone takes no time and is dated the day its predecessors finish; it needs no estimate", () => {
    const tasks = [
      { key: "build" },
      { key: "launch", dependsOn: ["build"] },
      { key: "announce", dependsOn: ["launch"] },
    ];
    const g = generateGantt({
      tasks,
      estimates: est(["build", 2], ["announce", 1]),
      milestones: ["launch"],
      startDate: "2027-03-01",
    });
    expect(g.items.map((i) => [i.key, i.start, i.end, i.days, i.milestone ?? false])).toEqual([
      ["build", "2027-03-01", "2027-03-02", 2, false],
      ["launch", "2027-03-02", "2027-03-02", 0, true],
      ["announce", "2027-03-03", "2027-03-03", 1, false],
    ]);
    expect(g.criticalPaths).toEqual([["build", "launch", "announce"]]);
  });

  test("resource levelling, hand-checked on Mon 2027-03-01: one person, one task at a time; half-time takes twice as long", () => {
    const tasks = [
      { key: "api", assignee: "ana" },
      { key: "ui", assignee: "ana" }, // independent of api; ship waits for it, so ana does it first
      { key: "docs", assignee: "ben" }, // ben gives half days: 1 day of work over 2 days
      { key: "ship", dependsOn: ["ui", "docs"] },
    ];
    const g = generateGantt({
      tasks,
      estimates: est(["api", 1.5], ["ui", 2], ["docs", 1], ["ship", 0.5]),
      assignees: [{ name: "ben", capacity: 0.5 }],
      startDate: "2027-03-01",
    });
    expect(g.items).toEqual([
      {
        key: "api",
        start: "2027-03-03",
        end: "2027-03-04",
        endsAtMidday: true,
        days: 1.5,
        slack: 0,
        assignee: "ana",
        waitsFor: "ui",
      },
      { key: "ui", start: "2027-03-01", end: "2027-03-02", days: 2, slack: 0, assignee: "ana" },
      { key: "docs", start: "2027-03-01", end: "2027-03-02", days: 2, slack: 1, assignee: "ben" },
      { key: "ship", start: "2027-03-03", end: "2027-03-03", endsAtMidday: true, days: 0.5, slack: 1 },
    ]);
    expect(g.finish).toBe("2027-03-04");
    // the wait for ana is part of the critical chain
    expect(g.criticalPaths).toEqual([["ui", "api"]]);
    expect(() =>
      generateGantt({
        tasks,
        estimates: est(["api", 1], ["ui", 1], ["docs", 1], ["ship", 1]),
        assignees: [{ name: "ben", capacity: 2 }],
        startDate: "2027-03-01",
      }),
    ).toThrow('capacity of assignee "ben" must be a share of a day in (0, 1], got 2');
  });

  test("every tied critical chain is reported", () => {
    // two equally long branches between s and e
    const tasks = [
      { key: "s" },
      { key: "x", dependsOn: ["s"] },
      { key: "y", dependsOn: ["s"] },
      { key: "e", dependsOn: ["x", "y"] },
      { key: "z" },
    ];
    const g = generateGantt({
      tasks,
      estimates: est(["s", 1], ["x", 2], ["y", 2], ["e", 1], ["z", 4]),
      startDate: "2027-03-01",
    });
    expect(g.criticalPaths).toEqual([["s", "x", "e"], ["s", "y", "e"], ["z"]]);
    expect(g.criticalPath).toEqual(["s", "x", "e"]);
  });

  test("duplicate estimates, unknown link ends and milestones, self links are refused with INVALID_INPUT naming them", () => {
    const base = { tasks: [{ key: "a" }, { key: "b" }], startDate: "2027-03-01" };
    expect(err(() => generateGantt({ ...base, estimates: est(["a", 1], ["b", 1], ["a", 3]) }))).toEqual({
      code: "INVALID_INPUT",
      message: 'duplicate estimates for task "a"',
    });
    expect(
      err(() =>
        generateGantt({ ...base, estimates: est(["a", 1], ["b", 1]), links: [{ from: "a", to: "q", type: "SS" }] }),
      )?.message,
    ).toBe("links name unknown tasks: a -SS-> q");
    expect(
      err(() =>
        generateGantt({ ...base, estimates: est(["a", 1], ["b", 1]), links: [{ from: "a", to: "a", type: "SS" }] }),
      )?.code,
    ).toBe("INVALID_INPUT");
    expect(err(() => generateGantt({ ...base, estimates: est(["a", 1]), milestones: ["m"] }))?.message).toBe(
      "milestones name unknown tasks: m",
    );
    expect(
      err(() =>
        generateGantt({
          ...base,
          estimates: est(["a", 1], ["b", 1]),
          links: [
            { from: "a", to: "b", type: "FS" },
            { from: "b", to: "a", type: "SS" },
          ],
        }),
      )?.message,
    ).toContain("cycle");
  });
});

describe("properties", () => {
  const graph = fc.integer({ min: 1, max: 18 }).chain((n) =>
    fc.record({
      n: fc.constant(n),
      deps: fc.array(fc.array(fc.nat(), { maxLength: 2 }), { minLength: n, maxLength: n }),
      links: fc.array(
        fc.record({
          a: fc.nat(),
          b: fc.nat(),
          type: fc.constantFrom("FS" as const, "SS" as const, "FF" as const),
          lag: fc.integer({ min: -6, max: 8 }).map((x) => x / 2), // half days
        }),
        { maxLength: 8 },
      ),
      days: fc.array(fc.double({ min: 0.1, max: 6, noNaN: true }), { minLength: n, maxLength: n }),
      milestones: fc.array(fc.boolean(), { minLength: n, maxLength: n }),
      assignees: fc.array(fc.constantFrom(undefined, "ana", "ben"), { minLength: n, maxLength: n }),
      benCapacity: fc.constantFrom(undefined, 0.5, 0.25, 1),
      workdays: fc.subarray([1, 2, 3, 4, 5, 6, 7], { minLength: 1 }),
      locale: fc.constantFrom<HolidayLocale>("intl", "US", "GB", "DE", "FR", "none"),
      own: fc.array(fc.integer({ min: 0, max: 120 }), { maxLength: 8 }),
      start: fc.integer({ min: 0, max: 800 }),
    }),
  );

  test("holidays are never scheduled; every link holds with its lag; nobody works two tasks at once; critical chains are tight, complete and cover every zero-slack task", () => {
    fc.assert(
      fc.property(graph, (g) => {
        const key = (i: number) => `t${i}`;
        const tasks = g.deps.map((ds, i) => ({
          key: key(i),
          dependsOn: i === 0 ? [] : [...new Set(ds.map((d) => key(d % i)))],
          ...(g.assignees[i] ? { assignee: g.assignees[i] } : {}),
        }));
        // links only go from a lower to a higher index: acyclic by construction
        const seen = new Set<string>();
        const links: GanttLink[] = [];
        for (const l of g.links) {
          const [lo, hi] = [Math.min(l.a % g.n, l.b % g.n), Math.max(l.a % g.n, l.b % g.n)];
          if (lo === hi || seen.has(`${lo}-${hi}`)) continue;
          seen.add(`${lo}-${hi}`);
          links.push({ from: key(lo), to: key(hi), type: l.type, lag: l.lag });
        }
        const milestones = tasks.filter((_, i) => g.milestones[i]).map((t) => t.key);
        const estimates = tasks
          .filter((t) => !milestones.includes(t.key))
          .map((t) => ({ key: t.key, days: g.days[Number(t.key.slice(1))]! }));
        const startDate = new Date(Date.UTC(2026, 0, 1 + g.start)).toISOString().slice(0, 10);
        const holidays = g.own.map((o) => new Date(Date.UTC(2026, 0, 1 + g.start + o)).toISOString().slice(0, 10));
        const out = generateGantt({
          tasks,
          estimates,
          startDate,
          workdays: g.workdays,
          locale: g.locale,
          holidays,
          links,
          milestones,
          ...(g.benCapacity ? { assignees: [{ name: "ben", capacity: g.benCapacity }] } : {}),
        });

        const h = halfDayIndex(new WorkCalendar(startDate, g.workdays, holidays, g.locale), 800);
        const items = new Map(out.items.map((it) => [it.key, it]));
        // half-day indices: es, ef
        const es = new Map<string, number>();
        const ef = new Map<string, number>();
        for (const it of out.items) {
          expect(h.isWorkday(it.start) && h.isWorkday(it.end)).toBe(true);
          const d = new Date(`${it.start}T00:00:00Z`);
          expect(holidaysOf(g.locale, d.getUTCFullYear())).not.toContain(it.start);
          expect(holidays).not.toContain(it.start);
          expect(holidays).not.toContain(it.end);
          expect(holidaysOf(g.locale, Number(it.end.slice(0, 4)))).not.toContain(it.end);
          if (it.milestone) {
            expect(it.days).toBe(0);
          } else {
            expect((h.end(it) - h.start(it) + 1) / 2).toBe(it.days);
            // effort stretched by the assignee's capacity, in half days
            const effort = g.days[Number(it.key.slice(1))]!;
            const cap = it.assignee === "ben" ? (g.benCapacity ?? 1) : 1;
            expect(it.days * 2).toBe(Math.max(1, Math.ceil((effort * 2) / cap - 1e-9)));
            es.set(it.key, h.start(it));
            ef.set(it.key, h.end(it));
          }
        }
        // nobody is booked on two tasks at once
        for (const a of out.items)
          for (const b of out.items)
            if (a.key < b.key && a.assignee && a.assignee === b.assignee && !a.milestone && !b.milestone)
              expect(ef.get(a.key)! < es.get(b.key)! || ef.get(b.key)! < es.get(a.key)!).toBe(true);
        const edges = [
          ...tasks.flatMap((t) =>
            t.dependsOn
              .filter((d) => !links.some((l) => l.from === d && l.to === t.key))
              .map((d) => ({ from: d, to: t.key, type: "FS" as const, lag: 0 })),
          ),
          ...links.map((l) => ({ ...l, lag: (l.lag ?? 0) * 2 })),
        ];
        for (const e of edges) {
          const p = items.get(e.from)!;
          const s = items.get(e.to)!;
          if (p.milestone || s.milestone) continue; // checked through their dates below
          if (e.type === "FS") expect(es.get(e.to)!).toBeGreaterThanOrEqual(ef.get(e.from)! + 1 + e.lag);
          if (e.type === "SS") expect(es.get(e.to)!).toBeGreaterThanOrEqual(es.get(e.from)! + e.lag);
          if (e.type === "FF") expect(ef.get(e.to)!).toBeGreaterThanOrEqual(ef.get(e.from)! + e.lag);
        }
        expect(out.finish).toBe(
          [...out.items]
            .map((i) => i.end)
            .sort()
            .at(-1),
        );
        // a wait for the assignee: right after the other task of the same person
        for (const it of out.items)
          if (it.waitsFor) {
            const w = items.get(it.waitsFor)!;
            expect(w.assignee).toBe(it.assignee);
            expect(es.get(it.key)).toBe(ef.get(w.key)! + 1);
          }
        // chains: tight, from a task nothing holds back to one ending at finish, only zero slack
        for (const chain of out.criticalPaths) {
          expect(items.get(chain.at(-1)!)!.end).toBe(out.finish);
          for (const k of chain) expect(items.get(k)!.slack).toBe(0);
          for (let i = 1; i < chain.length; i++)
            expect(
              edges.some((e) => e.from === chain[i - 1] && e.to === chain[i]) ||
                items.get(chain[i]!)!.waitsFor === chain[i - 1],
            ).toBe(true);
        }
        if (out.criticalPaths.length < 50) {
          const onChain = new Set(out.criticalPaths.flat());
          for (const it of out.items) if (it.slack === 0) expect(onChain.has(it.key)).toBe(true);
        }
        expect(out.criticalPath).toEqual(out.criticalPaths[0]);
      }),
      { numRuns: 150 },
    );
  });
});
