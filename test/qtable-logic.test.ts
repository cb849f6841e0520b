/**
 * QTable's pure logic: the Gantt schedule (hand-checked across a weekend and a holiday, plus
 * properties on random task graphs), the deterministic decomposition and estimates, field checks
 * and the tasks → records mapping.
 */
import { describe, expect, test } from "vitest";
import fc from "fast-check";
import { generateGantt, orderTasks, WorkCalendar } from "../skills/qtable/gantt.js";
import { halfDayIndex } from "./helpers/gantt-index.js";
import { parseGoal } from "../skills/qtable/decompose.js";
import { decomposeGoal } from "../skills/qtable/templates.js";
import { estimateTask } from "../skills/qtable/estimate-heuristics.js";
import { checkRecord, TableDefinitionSchema, TASKS_TABLE, isIsoDate, type Table } from "../skills/qtable/fields.js";
import { fieldMapping, recordsFromTasks, validateRecords } from "../skills/qtable/mapping.js";
import { planRecords } from "../skills/qtable/records-plan.js";
import { checkTaskList, phasesOf } from "../skills/qtable/task-list.js";

const codeOf = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return { code: (e as { code: string }).code, message: (e as Error).message };
  }
  return undefined;
};

describe("Gantt", () => {
  // Wed 2026-12-23 → Thu 24, Fri 25 is a holiday, Sat 26 / Sun 27 weekend, Mon 28 …
  const tasks = [
    { key: "a", dependsOn: [] },
    { key: "b", dependsOn: ["a"] },
    { key: "c", dependsOn: ["a"] },
    { key: "d", dependsOn: ["b", "c"] },
  ];
  const estimates = [
    { key: "a", days: 1.5 }, // Wed 23 and Thu 24 morning
    { key: "b", days: 1 }, // Thu 24 afternoon, Mon 28 morning (skips the holiday and the weekend)
    { key: "c", days: 3 }, // Thu 24 afternoon – Wed 30 midday
    { key: "d", days: 0.3 }, // half a day (rounded up) after the later of b and c: Wed 30 afternoon
  ];
  const halves = (g: ReturnType<typeof generateGantt>) =>
    g.items.map((i) => [i.key, `${i.start}${i.startsAtMidday ? " pm" : ""}`, `${i.end}${i.endsAtMidday ? " am" : ""}`]);

  test("hand-checked: across a weekend and a holiday, inclusive ends, half days (other fractions rounded up to one)", () => {
    const g = generateGantt({ tasks, estimates, startDate: "2026-12-23", holidays: ["2026-12-25"] });
    expect(halves(g)).toEqual([
      ["a", "2026-12-23", "2026-12-24 am"],
      ["b", "2026-12-24 pm", "2026-12-28 am"],
      ["c", "2026-12-24 pm", "2026-12-30 am"],
      ["d", "2026-12-30 pm", "2026-12-30"],
    ]);
    expect(g.items.map((i) => i.days)).toEqual([1.5, 1, 3, 0.5]);
    expect(g.finish).toBe("2026-12-30");
    expect(g.criticalPath).toEqual(["a", "c", "d"]);
    expect(g.items.find((i) => i.key === "b")!.slack).toBe(2);
  });

  test("without the holiday, Friday is worked; a start on a Saturday moves to Monday", () => {
    const g = generateGantt({ tasks, estimates, startDate: "2026-12-23", locale: "none" });
    expect(halves(g)).toEqual([
      ["a", "2026-12-23", "2026-12-24 am"],
      ["b", "2026-12-24 pm", "2026-12-25 am"],
      ["c", "2026-12-24 pm", "2026-12-29 am"],
      ["d", "2026-12-29 pm", "2026-12-29"],
    ]);
    const sat = generateGantt({ tasks: [{ key: "x" }], estimates: [{ key: "x", days: 2 }], startDate: "2026-12-26" });
    expect(sat.items[0]).toMatchObject({ start: "2026-12-28", end: "2026-12-29" });
    expect(sat.criticalPath).toEqual(["x"]);
  });

  test("custom workdays: a Sunday–Thursday week", () => {
    const g = generateGantt({
      tasks: [{ key: "x" }],
      estimates: [{ key: "x", days: 3 }],
      startDate: "2026-12-24",
      workdays: [7, 1, 2, 3, 4],
    });
    // Thu 24, (Fri, Sat off), Sun 27, Mon 28
    expect(g.items[0]).toMatchObject({ start: "2026-12-24", end: "2026-12-28" });
  });

  test("cycles and dangling dependencies are refused with INVALID_INPUT naming them", () => {
    const cyc = codeOf(() =>
      generateGantt({
        tasks: [
          { key: "a", dependsOn: ["c"] },
          { key: "b", dependsOn: ["a"] },
          { key: "c", dependsOn: ["b"] },
        ],
        estimates: [
          { key: "a", days: 1 },
          { key: "b", days: 1 },
          { key: "c", days: 1 },
        ],
        startDate: "2026-12-23",
      }),
    );
    expect(cyc).toEqual({ code: "INVALID_INPUT", message: "task dependencies have a cycle: a -> c -> b -> a" });
    expect(codeOf(() => orderTasks([{ key: "a", dependsOn: ["a"] }]))?.message).toBe(
      "task dependencies have a cycle: a -> a",
    );
    expect(
      codeOf(() =>
        orderTasks([
          { key: "a", dependsOn: ["ghost"] },
          { key: "b", dependsOn: ["a", "nope"] },
        ]),
      ),
    ).toEqual({ code: "INVALID_INPUT", message: "tasks depend on unknown tasks: a -> ghost, b -> nope" });
  });

  test("estimates must match the tasks; dates and workdays must be valid", () => {
    expect(
      codeOf(() =>
        generateGantt({
          tasks: [{ key: "a" }, { key: "b" }],
          estimates: [{ key: "a", days: 1 }],
          startDate: "2026-12-23",
        }),
      )?.message,
    ).toBe("tasks without an estimate: b");
    expect(
      codeOf(() =>
        generateGantt({
          tasks: [{ key: "a" }],
          estimates: [
            { key: "a", days: 1 },
            { key: "z", days: 1 },
          ],
          startDate: "2026-12-23",
        }),
      )?.message,
    ).toBe("estimates for unknown tasks: z");
    expect(
      codeOf(() =>
        generateGantt({ tasks: [{ key: "a" }], estimates: [{ key: "a", days: 0 }], startDate: "2026-12-23" }),
      )?.message,
    ).toContain("positive");
    expect(
      codeOf(() =>
        generateGantt({ tasks: [{ key: "a" }], estimates: [{ key: "a", days: 1 }], startDate: "2026-02-30" }),
      )?.message,
    ).toContain("startDate");
    expect(codeOf(() => new WorkCalendar("2026-12-23", [0]))?.message).toContain("ISO weekday");
    expect(codeOf(() => new WorkCalendar("2026-12-23", [1], ["12/25/2026"]))?.message).toContain("holidays");
  });

  // random DAGs: every schedule obeys the rules it promises
  const dag = fc
    .integer({ min: 1, max: 25 })
    .chain((n) =>
      fc.tuple(
        fc.array(fc.array(fc.nat(), { maxLength: 3 }), { minLength: n, maxLength: n }),
        fc.array(fc.double({ min: 0.1, max: 7, noNaN: true }), { minLength: n, maxLength: n }),
        fc.subarray([1, 2, 3, 4, 5, 6, 7], { minLength: 1 }),
        fc.array(fc.integer({ min: 0, max: 60 }), { maxLength: 10 }),
      ),
    );
  test("properties: starts on working days after every dependency ends; booked half days = the estimate rounded up to a half day; the critical path is a tight chain to finish", () => {
    fc.assert(
      fc.property(dag, ([deps, days, workdays, holidayOffsets]) => {
        const tasks = deps.map((ds, i) => ({
          key: `t${i}`,
          dependsOn: i === 0 ? [] : [...new Set(ds.map((d) => `t${d % i}`))],
        }));
        const estimates = days.map((d, i) => ({ key: `t${i}`, days: d }));
        const holidays = holidayOffsets.map((o) => new Date(Date.UTC(2027, 0, 4 + o)).toISOString().slice(0, 10));
        const g = generateGantt({ tasks, estimates, startDate: "2027-01-04", workdays, holidays, locale: "none" });
        const h = halfDayIndex(new WorkCalendar("2027-01-04", workdays, holidays), 400);
        const item = new Map(g.items.map((it) => [it.key, it]));
        for (const t of tasks) {
          const it = item.get(t.key)!;
          expect(h.isWorkday(it.start) && h.isWorkday(it.end)).toBe(true); // working days only
          expect(h.end(it) - h.start(it) + 1).toBe(Math.ceil(days[Number(t.key.slice(1))]! * 2 - 1e-9));
          expect(it.days * 2).toBe(h.end(it) - h.start(it) + 1);
          const depEnd = Math.max(-1, ...t.dependsOn.map((d) => h.end(item.get(d)!)));
          expect(h.start(it)).toBe(depEnd + 1); // as early as possible
        }
        expect(g.finish).toBe(
          [...g.items]
            .map((i) => i.end)
            .sort()
            .at(-1),
        );
        const cp = g.criticalPath.map((k) => item.get(k)!);
        expect(cp.at(-1)!.end).toBe(g.finish);
        expect(tasks.find((t) => t.key === cp[0]!.key)!.dependsOn).toEqual([]);
        for (let i = 1; i < cp.length; i++) {
          expect(tasks.find((t) => t.key === cp[i]!.key)!.dependsOn).toContain(cp[i - 1]!.key);
          expect(h.start(cp[i]!)).toBe(h.end(cp[i - 1]!) + 1);
        }
        for (const c of cp) expect(c.slack).toBe(0);
      }),
      { numRuns: 200 },
    );
  });
});

describe("decomposition and estimates (no model configured)", () => {
  test("the tasks reflect the goal's words: subject and listed parts", () => {
    expect(
      parseGoal("Plan an approval system with multi-level sign-off, e-mail notifications and an audit log"),
    ).toEqual({ subject: "approval system", parts: ["multi-level sign-off", "e-mail notifications", "audit log"] });
    const tasks = decomposeGoal(
      "Plan an approval system, estimate the effort, build a timeline and put the tasks into the current table",
    );
    expect(tasks.map((t) => t.key)).toEqual(["requirements", "design", "build", "test", "docs", "rollout"]);
    for (const t of tasks) expect(t.title).toContain("approval system");
    const other = decomposeGoal("Build a customer onboarding portal including SSO and billing");
    expect(other.map((t) => t.key)).toEqual([
      "requirements",
      "design",
      "build-sso",
      "build-billing",
      "test",
      "docs",
      "rollout",
    ]);
    expect(other.find((t) => t.key === "build-sso")!.title).toBe("Build SSO for the customer onboarding portal");
    expect(other.find((t) => t.key === "test")!.dependsOn).toEqual(["build-sso", "build-billing"]);
    expect(() => orderTasks(other)).not.toThrow();
  });

  test("deterministic and well-formed for any goal", () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 200 }), (goal) => {
        const a = decomposeGoal(goal);
        expect(decomposeGoal(goal)).toEqual(a);
        expect(new Set(a.map((t) => t.key)).size).toBe(a.length);
        expect(() => orderTasks(a)).not.toThrow();
        for (const t of a) {
          expect(t.key).toMatch(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/);
          expect(estimateTask(t).days).toBeGreaterThan(0);
        }
      }),
      { numRuns: 200 },
    );
  });

  test("estimates follow what a task does", () => {
    const e = (title: string, description = "") => estimateTask({ key: "k", title, description });
    expect(e("Build the API").days).toBeGreaterThan(e("Design the API").days);
    expect(e("Design the API").days).toBeGreaterThan(e("Document the API").days);
    expect(e("Something unusual").confidence).toBeLessThan(e("Build the API").confidence);
    expect(e("Build the API", "word ".repeat(60)).days).toBeGreaterThan(e("Build the API").days);
  });
});

describe("fields and records", () => {
  const table: Table = { id: "tbl_1", ...structuredClone(TASKS_TABLE) };

  test("table definitions: field names, types, select options, duplicates", () => {
    expect(TableDefinitionSchema.safeParse(TASKS_TABLE).success).toBe(true);
    const bad = (fields: unknown) => TableDefinitionSchema.safeParse({ name: "x", fields }).error?.issues[0];
    expect(bad([{ name: "s", type: "select" }])).toMatchObject({ path: ["fields", 0, "options"] });
    expect(bad([{ name: "n", type: "number", options: ["a"] }])).toMatchObject({ path: ["fields", 0, "options"] });
    expect(
      bad([
        { name: "a", type: "text" },
        { name: "a", type: "number" },
      ]),
    ).toMatchObject({ path: ["fields", 1, "name"] });
    expect(bad([{ name: "x", type: "blob" }])).toMatchObject({ path: ["fields", 0, "type"] });
    expect(bad([{ name: "id", type: "text" }])).toMatchObject({ path: ["fields", 0, "name"] });
  });

  test("values are checked against field types, required fields and unknown fields", () => {
    expect(
      checkRecord(table.fields, {
        title: "t",
        estimateDays: 2,
        start: "2026-12-23",
        status: "todo",
        assignee: "ana@example.com",
      }),
    ).toEqual({
      ok: true,
      values: { title: "t", estimateDays: 2, start: "2026-12-23", status: "todo", assignee: "ana@example.com" },
    });
    expect(checkRecord(table.fields, { description: "no title" })).toMatchObject({ ok: false, field: "title" });
    expect(checkRecord(table.fields, { title: "t", estimateDays: "2" })).toMatchObject({
      ok: false,
      field: "estimateDays",
    });
    expect(checkRecord(table.fields, { title: "t", start: "2026-13-01" })).toMatchObject({ ok: false, field: "start" });
    expect(checkRecord(table.fields, { title: "t", status: "blocked" })).toMatchObject({
      ok: false,
      field: "status",
      message: 'field "status" must be one of "todo", "doing", "done", "removed", got "blocked"',
    });
    expect(checkRecord(table.fields, { title: "t", color: "red" })).toMatchObject({ ok: false, field: "color" });
    expect(checkRecord(table.fields, { title: "t", estimateDays: Infinity })).toMatchObject({
      ok: false,
      field: "estimateDays",
    });
    expect(checkRecord([{ name: "rel", type: "relation" }], { rel: ["rec_1", 2] })).toMatchObject({
      ok: false,
      field: "rel",
    });
    expect(isIsoDate("2028-02-29")).toBe(true);
    expect(isIsoDate("2027-02-29")).toBe(false);
  });

  test("tasks map onto the table's fields by name; garbage is refused naming the record and field", () => {
    expect(fieldMapping(table)).toEqual({
      title: "title",
      description: "description",
      estimate: "estimateDays",
      start: "start",
      end: "end",
      status: "status",
      dependsOn: "dependsOn",
      key: "key",
      assignee: "assignee",
      parent: "parent",
      goal: "goal",
    });
    const recs = recordsFromTasks(
      table,
      {
        tasks: [
          { key: "a", title: "A", description: "first", dependsOn: [] },
          { key: "b", title: "B", dependsOn: ["a"] },
        ],
        estimates: [
          { key: "a", days: 1 },
          { key: "b", days: 2.5 },
        ],
        gantt: {
          items: [
            { key: "a", start: "2026-12-23", end: "2026-12-23" },
            { key: "b", start: "2026-12-24", end: "2026-12-29" },
          ],
        },
      },
      (k) => `rec_${k}`,
    );
    // dependsOn is a relation in the demo table: record links to the tasks' rows
    expect(validateRecords(table, recs)).toEqual([
      {
        title: "A",
        key: "a",
        description: "first",
        estimateDays: 1,
        start: "2026-12-23",
        end: "2026-12-23",
        status: "todo",
      },
      {
        title: "B",
        key: "b",
        estimateDays: 2.5,
        start: "2026-12-24",
        end: "2026-12-29",
        status: "todo",
        dependsOn: ["rec_a"],
      },
    ]);
    const textDeps: Table = {
      id: "t2",
      name: "Old",
      fields: [
        { name: "title", type: "text" },
        { name: "dependsOn", type: "text" },
      ],
    };
    expect(
      recordsFromTasks(textDeps, {
        tasks: [
          { key: "a", title: "A" },
          { key: "b", title: "B", dependsOn: ["a"] },
        ],
      }),
    ).toEqual([{ title: "A" }, { title: "B", dependsOn: "a" }]);
    expect(codeOf(() => validateRecords(table, [{ title: "ok" }, { title: "Second", start: "tomorrow" }]))).toEqual({
      code: "INVALID_INPUT",
      message: 'record 1 ("Second"), field "start": field "start" is a date: expected YYYY-MM-DD, got "tomorrow"',
    });
    expect(
      codeOf(() =>
        recordsFromTasks(
          { id: "t", name: "Numbers", fields: [{ name: "n", type: "number" }] },
          { tasks: [{ key: "a", title: "A" }] },
        ),
      )?.message,
    ).toContain("no text field");
    expect(
      codeOf(() => recordsFromTasks(table, { tasks: [{ key: "a", title: "A" }], estimates: [{ key: "zz", days: 1 }] }))
        ?.message,
    ).toBe("estimates or Gantt items for unknown tasks: zz");
  });
});

describe("phases and removed rows (records-plan)", () => {
  const table: Table = { id: "t", name: "Tasks", fields: TASKS_TABLE.fields };
  const ph = { key: "build", title: "Build it" };

  test("a phase's key is no task's and it has one title; the split's check refuses both for repair", () => {
    expect(codeOf(() => phasesOf([{ key: "build", phase: ph }]))).toEqual({
      code: "INVALID_INPUT",
      message: 'phase "build" has the key of a task',
    });
    const twice = [
      { key: "a", phase: ph },
      { key: "b", phase: { key: "build", title: "Other" } },
    ];
    expect(codeOf(() => phasesOf(twice))?.message).toBe('phase "build" has two titles: "Build it" and "Other"');
    expect(checkTaskList({ tasks: twice.map((t) => ({ ...t, title: t.key })) })).toEqual({
      ok: false,
      problems: 'phase "build" has two titles: "Build it" and "Other"',
    });
  });

  test("without a goal, or in a table without a removed status, rows no longer planned are left alone", () => {
    const existing = [{ id: "r1", values: { title: "Old", key: "old", goal: "g", status: "todo" } }];
    const tasks = [{ key: "a", title: "A" }];
    expect(planRecords(table, { goal: "g", tasks }, existing, (k) => `new:${k}`).remove).toEqual([
      {
        key: "old",
        id: "r1",
        values: { ...existing[0]!.values, status: "removed" },
        before: existing[0]!.values,
        changed: ["status"],
      },
    ]);
    expect(planRecords(table, { tasks }, existing, (k) => `new:${k}`).remove).toEqual([]);
    const noRemoved: Table = {
      ...table,
      fields: table.fields.map((f) => (f.name === "status" ? { ...f, options: ["todo", "done"] } : f)),
    };
    expect(planRecords(noRemoved, { goal: "g", tasks }, existing, (k) => `new:${k}`).remove).toEqual([]);
  });
});
