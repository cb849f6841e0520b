/**
 * Re-planning the same goal into the same table, on every backend: the second run's preview is a
 * diff (rows updated, none created), approved it updates the rows by task key instead of adding
 * copies, dependencies are record links to the tasks' rows, Christmas Day is never scheduled by
 * default, and a failing run's compensation restores the updated rows to their previous values.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { settle, stepOf } from "./helpers/run.js";
import { approvalPlan, qtableBackends, type QTableRig } from "./helpers/qtable.js";

const GOAL = "Plan an approval system with e-mail notifications and an audit log";

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
      const first = await settle(rig.runtime.run(plan, { workspaceId: ws, context: { goal: GOAL, table: { id: table.id }, startDate, holidays: [] } }));
      expect(first.view.status).toBe("waiting_confirmation");
      const preview = first.view.pendingConfirmations[0]!.preview as { diff: { created: { key: string }[]; updated: { key: string; changed: string[]; before: Record<string, unknown>; after: Record<string, unknown> }[]; unchanged: { key: string }[] } };
      const done = await settle(await rig.runtime.confirm(first.view.runId, { stepId: "create", decision: "approve" }));
      return { preview, done };
    };

    // run 1, across Christmas with no holidays given: the 25th is not worked anyway
    const one = await run("2026-12-21");
    expect(one.done.view.status).toBe("completed");
    const tasks = (stepOf(one.done.view, "split").output as { tasks: { key: string; dependsOn: string[] }[] }).tasks;
    expect(one.preview.diff.created.map((r) => r.key)).toEqual(tasks.map((t) => t.key));
    const afterOne = await rows();
    expect(afterOne).toHaveLength(tasks.length);
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
    expect(two.preview.diff.updated.map((u) => u.key)).toEqual(tasks.map((t) => t.key));
    const req = two.preview.diff.updated.find((u) => u.key === "requirements")!;
    expect(req.changed).toEqual(expect.arrayContaining(["start", "end"]));
    expect(req.before.start).toBe("2026-12-21");
    expect(req.after.start).toBe("2027-01-25");
    expect(stepOf(two.done.view, "create").output).toMatchObject({ created: true, recordIds: [], updatedIds: afterOne.map((r) => r.id) });
    const afterTwo = await rows();
    expect(afterTwo.map((r) => r.id)).toEqual(afterOne.map((r) => r.id));
    expect(afterTwo.find((r) => r.values.key === "requirements")!.values.start).toBe("2027-01-25");

    // run 3 with the same dates: unchanged
    const three = await run("2027-01-25");
    expect(three.preview.diff).toMatchObject({ created: [], updated: [] });
    expect(three.preview.diff.unchanged).toHaveLength(tasks.length);

    // run 4 moves the dates again, then fails: compensation restores run 2's values, once
    const failing = approvalPlan();
    failing.steps.push({ stepId: "publish", skillName: "core.fail", dependsOn: ["create"], arguments: { code: "EXECUTION_FAILED", message: "publishing failed" }, retry: { maxAttempts: 1 } });
    const four = await run("2027-03-01", failing);
    expect(four.done.view.status).toBe("rolled_back");
    expect(stepOf(four.done.view, "create")).toMatchObject({ status: "rolled_back" });
    expect(await rows()).toEqual(afterTwo);
    expect(await rig.store.deleteWrite(ws, `${four.done.view.runId}:create`)).toBe(0);
    expect(await rows()).toEqual(afterTwo);
  });
});
