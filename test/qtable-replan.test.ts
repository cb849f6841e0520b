/**
 * Re-planning the same goal into the same table, on every backend: the second run's preview is a
 * diff (rows updated, none created), approved it updates the rows by task key instead of adding
 * copies, dependencies are record links to the tasks' rows, Christmas Day is never scheduled by
 * default, and a failing run's compensation restores the updated rows to their previous values.
 * A re-plan with a smaller scope marks the rows it no longer has removed (and compensation
 * restores them, once); phases are parent rows of their tasks; another goal's rows are not touched.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { settle, stepOf } from "./helpers/run.js";
import { rowsOf } from "../skills/qtable/mapping.js";
import type { Task } from "../skills/qtable/schemas.js";
import { approvalPlan, qtableBackends, type QTableRig } from "./helpers/qtable.js";

const GOAL = "Plan an approval system with e-mail notifications and an audit log";

type Row = { id: string; values: Record<string, unknown> };
interface Diff {
  created: { key: string; values: Record<string, unknown> }[];
  updated: { key: string; id: string; changed: string[] }[];
  unchanged: { key: string }[];
  removed: { key: string; id: string; values: Record<string, unknown> }[];
}
/** The reference chain with the split's goal given and the rows' goal (the project) fixed. */
function scopedPlan(split: string, goal: string, fail = false) {
  const plan = approvalPlan();
  plan.steps.find((s: any) => s.stepId === "split").arguments.goal = split;
  plan.steps.find((s: any) => s.stepId === "create").arguments.goal = goal;
  if (fail)
    plan.steps.push({
      stepId: "publish",
      skillName: "core.fail",
      dependsOn: ["create"],
      arguments: { code: "EXECUTION_FAILED", message: "publishing failed" },
      retry: { maxAttempts: 1 },
    });
  return plan;
}

describe.each(qtableBackends)("re-planning into one table on $name", ({ open }) => {
  let rig: QTableRig;
  beforeAll(async () => {
    rig = await open();
  });
  afterAll(() => rig?.close());

  test("a second run updates the rows by key (diff at the confirmation); a failed third run's compensation restores them", async () => {
    const ws = "ws-replan";
    const table = await rig.store.ensureWorkspace(ws);
    const rows = async () => (await rig.store.listRecords(ws, table.id, { limit: 1_000 }))!.records;
    const run = async (startDate: string, plan = approvalPlan()) => {
      const first = await settle(
        rig.runtime.run(plan, {
          workspaceId: ws,
          context: { goal: GOAL, table: { id: table.id }, startDate, holidays: [] },
        }),
      );
      expect(first.view.status).toBe("waiting_confirmation");
      const preview = first.view.pendingConfirmations[0]!.preview as {
        diff: {
          created: { key: string }[];
          updated: {
            key: string;
            changed: string[];
            before: Record<string, unknown>;
            after: Record<string, unknown>;
          }[];
          unchanged: { key: string }[];
        };
      };
      const done = await settle(await rig.runtime.confirm(first.view.runId, { stepId: "create", decision: "approve" }));
      return { preview, done };
    };

    // run 1, across Christmas with no holidays given: the 25th is not worked anyway
    const one = await run("2026-12-21");
    expect(one.done.view.status).toBe("completed");
    const tasks = (stepOf(one.done.view, "split").output as { tasks: { key: string; dependsOn: string[] }[] }).tasks;
    // the rows: the tasks, and the build phase (two parts) as a row of its own before them
    const keys = rowsOf({ tasks: tasks as Task[] }).map((r) => r.key);
    expect(keys).toEqual([...tasks.slice(0, 2).map((t) => t.key), "build", ...tasks.slice(2).map((t) => t.key)]);
    expect(one.preview.diff.created.map((r) => r.key)).toEqual(keys);
    const afterOne = await rows();
    expect(afterOne).toHaveLength(keys.length);
    for (const r of afterOne) for (const d of [r.values.start, r.values.end]) expect(d).not.toBe("2026-12-25");
    // dependencies are links to the dependency's row
    const idOf = new Map(afterOne.map((r) => [r.values.key as string, r.id]));
    for (const t of tasks) {
      const row = afterOne.find((r) => r.values.key === t.key)!;
      expect(row.values.dependsOn ?? []).toEqual(t.dependsOn.map((d) => idOf.get(d)));
    }

    // run 2, a month later: every row updated (its dates), none created, the diff says so
    const two = await run("2027-01-25");
    expect(two.done.view.status).toBe("completed");
    expect(two.preview.diff.created).toEqual([]);
    expect(two.preview.diff.unchanged).toEqual([]);
    expect(two.preview.diff.updated.map((u) => u.key)).toEqual(keys);
    const req = two.preview.diff.updated.find((u) => u.key === "requirements")!;
    expect(req.changed).toEqual(expect.arrayContaining(["start", "end"]));
    expect(req.before.start).toBe("2026-12-21");
    expect(req.after.start).toBe("2027-01-25");
    expect(stepOf(two.done.view, "create").output).toMatchObject({
      created: true,
      recordIds: [],
      updatedIds: afterOne.map((r) => r.id),
    });
    const afterTwo = await rows();
    expect(afterTwo.map((r) => r.id)).toEqual(afterOne.map((r) => r.id));
    expect(afterTwo.find((r) => r.values.key === "requirements")!.values.start).toBe("2027-01-25");

    // run 3 with the same dates: unchanged
    const three = await run("2027-01-25");
    expect(three.preview.diff).toMatchObject({ created: [], updated: [] });
    expect(three.preview.diff.unchanged).toHaveLength(keys.length);

    // run 4 moves the dates again, then fails: compensation restores run 2's values, once
    const failing = approvalPlan();
    failing.steps.push({
      stepId: "publish",
      skillName: "core.fail",
      dependsOn: ["create"],
      arguments: { code: "EXECUTION_FAILED", message: "publishing failed" },
      retry: { maxAttempts: 1 },
    });
    const four = await run("2027-03-01", failing);
    expect(four.done.view.status).toBe("rolled_back");
    expect(stepOf(four.done.view, "create")).toMatchObject({ status: "rolled_back" });
    expect(await rows()).toEqual(afterTwo);
    expect(await rig.store.deleteWrite(ws, `${four.done.view.runId}:create`)).toBe(0);
    expect(await rows()).toEqual(afterTwo);
  });
});

describe.each(qtableBackends)("removed rows and phases on $name", ({ open }) => {
  let rig: QTableRig;
  beforeAll(async () => {
    rig = await open();
  });
  afterAll(() => rig?.close());

  test("a smaller re-plan marks the rows it no longer has removed, compensation restores them once; phases are parents; other goals untouched", async () => {
    const ws = "ws-removed";
    const table = await rig.store.ensureWorkspace(ws);
    const rows = async (): Promise<Row[]> => (await rig.store.listRecords(ws, table.id, { limit: 1_000 }))!.records;
    const byKey = (rs: Row[], goal = "approval system") =>
      new Map(rs.filter((r) => r.values.goal === goal).map((r) => [r.values.key as string, r]));
    const run = async (plan: unknown) => {
      const first = await settle(
        rig.runtime.run(plan as any, {
          workspaceId: ws,
          context: { goal: "unused", table: { id: table.id }, startDate: "2027-02-01", holidays: [] },
        }),
      );
      expect(first.view.status).toBe("waiting_confirmation");
      const diff = (first.view.pendingConfirmations[0]!.preview as { diff: Diff }).diff;
      const done = await settle(await rig.runtime.confirm(first.view.runId, { stepId: "create", decision: "approve" }));
      return { diff, done };
    };

    // run 1: the build phase has two parts, so it is a parent row of both
    const one = await run(scopedPlan(GOAL, "approval system"));
    expect(one.done.view.status).toBe("completed");
    expect(one.diff.created.map((r) => r.key)).toEqual([
      "requirements",
      "design",
      "build",
      "build-e-mail-notifications",
      "build-audit-log",
      "test",
      "docs",
      "rollout",
    ]);
    expect(one.diff.removed).toEqual([]);
    const a = byKey(await rows());
    const build = a.get("build")!;
    expect(build.values).toMatchObject({ title: "Build the approval system", status: "todo", goal: "approval system" });
    expect(build.values.parent).toBeUndefined();
    for (const k of ["build-e-mail-notifications", "build-audit-log"])
      expect(a.get(k)!.values.parent).toEqual([build.id]);
    // the phase row spans its tasks
    expect(build.values.start).toBe(a.get("build-audit-log")!.values.start);
    expect(build.values.end).toBe(a.get("build-audit-log")!.values.end);
    expect(a.get("test")!.values.parent).toBeUndefined();

    // another goal in the same table: its own rows (same template keys), nothing of the first removed
    const other = await run(scopedPlan("Plan a billing portal", "billing portal"));
    expect(other.diff.updated).toEqual([]);
    expect(other.diff.removed).toEqual([]);
    expect(other.diff.created.map((r) => r.key)).toContain("requirements");
    const afterOther = await rows();
    expect(byKey(afterOther)).toEqual(a);

    // run 2, without the audit log: that task is removed (kept, status "removed"), the rest updated or unchanged
    const two = await run(scopedPlan("Plan an approval system with e-mail notifications", "approval system"));
    expect(two.done.view.status).toBe("completed");
    expect(two.diff.created).toEqual([]);
    expect(two.diff.removed).toEqual([
      { key: "build-audit-log", id: a.get("build-audit-log")!.id, values: a.get("build-audit-log")!.values },
    ]);
    const b = byKey(await rows());
    expect(b.size).toBe(a.size);
    expect(b.get("build-audit-log")!.values).toEqual({ ...a.get("build-audit-log")!.values, status: "removed" });
    // the hierarchy is kept: the same phase row is the remaining part's parent
    expect(b.get("build")!.id).toBe(build.id);
    expect(b.get("build-e-mail-notifications")!.values.parent).toEqual([build.id]);
    expect(stepOf(two.done.view, "create").output).toMatchObject({ recordIds: [] });
    expect((stepOf(two.done.view, "create").output as { updatedIds: string[] }).updatedIds).toContain(
      a.get("build-audit-log")!.id,
    );
    // a removed row is not removed again
    const again = await run(scopedPlan("Plan an approval system with e-mail notifications", "approval system"));
    expect(again.diff.removed).toEqual([]);
    expect(again.diff.updated).toEqual([]);
    const afterAgain = await rows();

    // run 3 swaps the parts and fails: the audit log comes back (todo), the notifications are
    // removed, then compensation restores both to run 2's values, once
    const three = await run(scopedPlan("Plan an approval system with an audit log", "approval system", true));
    expect(three.diff.removed.map((r) => r.key)).toEqual(["build-e-mail-notifications"]);
    expect(three.diff.updated.find((u) => u.key === "build-audit-log")!.changed).toContain("status");
    expect(three.done.view.status).toBe("rolled_back");
    expect(await rows()).toEqual(afterAgain);
    expect(await rig.store.deleteWrite(ws, `${three.done.view.runId}:create`)).toBe(0);
    expect(await rows()).toEqual(afterAgain);

    // approved for good, the audit log is planned again and its status starts over
    const four = await run(scopedPlan("Plan an approval system with an audit log", "approval system"));
    expect(four.done.view.status).toBe("completed");
    const d = byKey(await rows());
    expect(d.get("build-audit-log")!.values.status).toBe("todo");
    expect(d.get("build-e-mail-notifications")!.values.status).toBe("removed");
  });
});
