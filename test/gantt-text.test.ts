/** The confirmation's text Gantt (src/cli/gantt-text.ts): what the CLI prints under the records preview. */
import { describe, expect, test } from "vitest";
import { generateGantt } from "../skills/qtable/gantt.js";
import { ganttText } from "../src/cli/gantt-text.js";
import { previewText } from "../src/cli/render.js";

describe("text Gantt", () => {
  const g = generateGantt({
    tasks: [
      { key: "design" },
      { key: "build", dependsOn: ["design"], assignee: "ana" },
      { key: "docs", dependsOn: ["design"] },
      { key: "live", dependsOn: ["build"] },
    ],
    estimates: [
      { key: "design", days: 1.5 },
      { key: "build", days: 3 },
      { key: "docs", days: 1 },
    ],
    milestones: ["live"],
    startDate: "2026-12-23", // Wed; Fri 25 is Christmas (intl), then the weekend
  });
  const crit = new Set(g.criticalPaths.flat());
  const timeline = { ...g, items: g.items.map((i) => ({ ...i, critical: crit.has(i.key) })) };

  test("one column per day: half days, days off, a milestone, critical tasks, days and assignee", () => {
    expect(ganttText(timeline)).toEqual([
      "one column per day; █ work, ▌▐ half a day, · day off, ◆ milestone, * critical; finish 2026-12-30",
      "          23 Dec",
      "* design  █▌···  1.5d",
      "* build    ▐···██▌  3d  ana",
      "  docs     ▐···▌  1d",
      "* live      ···  ◆",
    ]);
  });

  test("a long plan is drawn one column per week; run text is escaped", () => {
    const long = generateGantt({
      tasks: [{ key: "a" }, { key: "b", dependsOn: ["a"] }],
      estimates: [
        { key: "a", days: 40 },
        { key: "b", days: 30 },
      ],
      startDate: "2027-03-01",
    });
    const lines = ganttText({
      ...long,
      items: long.items.map((i) => ({ ...i, key: i.key === "a" ? "a\u001b[2J" : i.key })),
    });
    expect(lines[0]).toMatch(/^one column per week/);
    expect(lines.join("\n")).not.toContain("\u001b");
    expect(lines[2]).toMatch(/^ {2}a.*█{8}/);
    expect(lines[3]).toMatch(/^ {2}b {2,}█+/);
  });

  test("the records preview prints the timeline under the rows", () => {
    const text = previewText({
      table: { id: "tbl_1", name: "Tasks" },
      count: 1,
      records: [{ title: "Design it", start: "2026-12-23", end: "2026-12-24" }],
      timeline,
    });
    expect(text).toContain("\nTimeline:\n  one column per day;");
    expect(text).toContain("  * design  █▌···  1.5d");
  });

  test("a re-plan's preview says what the write does and names the rows it marks removed", () => {
    const text = previewText({
      table: { id: "tbl_1", name: "Tasks" },
      count: 2,
      records: [{ title: "Design it" }, { title: "Build it" }],
      diff: {
        created: [{ key: "build" }],
        updated: [{ key: "design" }],
        unchanged: [],
        removed: [{ key: "audit", values: { title: "Build the audit log" } }],
      },
    });
    expect(text.split("\n")[0]).toBe(
      '2 records to write in table "Tasks" (tbl_1): 1 to create, 1 to update, 0 unchanged, 1 to mark removed:',
    );
    expect(text).toContain("\nNo longer in the plan (status set to removed):\n  Build the audit log (audit)");
    // a first plan reads as before
    expect(
      previewText({
        table: { id: "tbl_1", name: "Tasks" },
        count: 1,
        records: [{ title: "A" }],
        diff: { created: [{ key: "a" }], updated: [], unchanged: [], removed: [] },
      }).split("\n")[0],
    ).toBe('1 records to create in table "Tasks" (tbl_1):');
  });
});
