/**
 * The reference chain (examples/approval-system.plan.json) end to end on every backend: split →
 * (estimate ‖ describe schema) → Gantt → create records, paused at the records confirmation.
 * Records are counted in the table store itself.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { ToolchainError } from "../src/kernel/errors.js";
import { settle, stepOf } from "./helpers/run.js";
import { rowsOf } from "../skills/qtable/mapping.js";
import type { Task } from "../skills/qtable/schemas.js";
import { approvalPlan, qtableBackends, type QTableRig } from "./helpers/qtable.js";

const silent = { debug() {}, info() {}, warn() {}, error() {} };
const GOAL = "Plan an approval system with e-mail notifications and an audit log";
let wsSeq = 0;

describe.each(qtableBackends)("approval-system chain on $name", ({ open }) => {
  let rig: QTableRig;
  beforeAll(async () => {
    rig = await open();
  });
  afterAll(() => rig?.close());
  beforeEach(() => {
    rig.store.faults = {};
  });

  /** A fresh workspace with its demo table, and the chain started in it, up to its pause. */
  async function startChain(plan = approvalPlan(), holidays: string[] = ["2026-12-25"]) {
    const ws = `ws-${++wsSeq}`;
    const table = await rig.store.ensureWorkspace(ws);
    const context = { goal: GOAL, table: { id: table.id }, startDate: "2026-12-21", holidays };
    const first = await settle(rig.runtime.run(plan, { workspaceId: ws, context }));
    const records = async () => (await rig.store.listRecords(ws, table.id, { limit: 1_000 }))!.records;
    return { ws, table, first, view: first.view, records };
  }

  test("pauses at the records confirmation with a preview of every record; nothing is written until approved", async () => {
    const { view, table, records } = await startChain();
    expect(view.status).toBe("waiting_confirmation");
    expect(["split", "estimate", "schema", "gantt"].map((id) => stepOf(view, id).status)).toEqual([
      "completed",
      "completed",
      "completed",
      "completed",
    ]);
    const [p] = view.pendingConfirmations;
    expect(p).toMatchObject({ stepId: "create", skillName: "qtable.task.records.create" });
    const preview = p!.preview as {
      table: { id: string; name: string };
      count: number;
      records: Record<string, unknown>[];
    };
    const tasks = (stepOf(view, "split").output as { tasks: Task[] }).tasks;
    expect(preview.table).toEqual({ id: table.id, name: "Tasks" });
    // every task, and the build phase (two parts) as their parent row
    const rows = rowsOf({ tasks });
    expect(rows).toHaveLength(tasks.length + 1);
    expect(preview.count).toBe(rows.length);
    expect(preview.records.map((r) => r.title)).toEqual(rows.map((t) => t.title));
    expect(tasks.map((t) => t.title)).toContain("Build audit log for the approval system");
    expect(await records()).toEqual([]);
  });

  test("approved: the records are in the table with their estimates and Gantt dates", async () => {
    const { view, records } = await startChain();
    const done = await settle(await rig.runtime.confirm(view.runId, { stepId: "create", decision: "approve" }));
    expect(done.view.status).toBe("completed");
    const gantt = stepOf(done.view, "gantt").output as {
      items: { key: string; start: string; end: string }[];
      finish: string;
    };
    const tasks = (stepOf(done.view, "split").output as { tasks: { key: string; title: string }[] }).tasks;
    const estimates = (stepOf(done.view, "estimate").output as { estimates: { key: string; days: number }[] })
      .estimates;
    const rows = await records();
    expect(rows).toHaveLength(rowsOf({ tasks }).length);
    tasks.forEach((t) => {
      const item = gantt.items.find((g) => g.key === t.key)!;
      expect(rows.find((r) => r.values.key === t.key)!.values).toMatchObject({
        title: t.title,
        start: item.start,
        end: item.end,
        estimateDays: estimates.find((e) => e.key === t.key)!.days,
        status: "todo",
      });
    });
    // the holiday and the weekends are not worked; the first task starts on the start date
    for (const r of rows)
      for (const d of [r.values.start as string, r.values.end as string]) {
        expect(d).not.toBe("2026-12-25");
        expect([0, 6]).not.toContain(new Date(`${d}T00:00:00Z`).getUTCDay());
      }
    expect(rows[0]!.values.start).toBe("2026-12-21");
    expect(stepOf(done.view, "create").output).toMatchObject({ created: true, recordIds: rows.map((r) => r.id) });
    expect(rig.store.writes).toBeGreaterThan(0);
  });

  test("rejected: nothing is written", async () => {
    const { view, records } = await startChain();
    const done = await settle(
      await rig.runtime.confirm(view.runId, { stepId: "create", decision: "reject", comment: "not now" }),
    );
    expect(stepOf(done.view, "create")).toMatchObject({ status: "failed", error: { code: "REJECTED" } });
    expect(["failed", "rolled_back"]).toContain(done.view.status);
    expect(await records()).toEqual([]);
  });

  test("fail_fast after the records were created: compensation deletes exactly those records", async () => {
    const plan = approvalPlan();
    plan.steps.push({
      stepId: "publish",
      skillName: "core.fail",
      dependsOn: ["create"],
      arguments: { code: "EXECUTION_FAILED", message: "publishing failed" },
      retry: { maxAttempts: 1 },
    });
    const { ws, table, view, records } = await startChain(plan);
    // a record written by someone else stays
    await rig.store.createRecords(ws, table.id, [{ title: "Written by a person" }], `manual-${ws}`);
    const done = await settle(await rig.runtime.confirm(view.runId, { stepId: "create", decision: "approve" }));
    expect(done.view.status).toBe("rolled_back");
    expect(stepOf(done.view, "create")).toMatchObject({ status: "rolled_back", rollback: { status: "rolled_back" } });
    expect(done.events.filter((e) => e.type === "step_rolled_back").map((e) => e.stepId)).toEqual(["create"]);
    expect((await records()).map((r) => r.values.title)).toEqual(["Written by a person"]);
  });

  test("the write is repeated with the same idempotency key (its reply was lost): records are created once", async () => {
    const { view, records } = await startChain();
    const before = rig.store.writes;
    let calls = 0;
    rig.store.faults.afterWrite = () => {
      // the first write commits, then its caller never hears back
      if (++calls === 1) throw new ToolchainError("TRANSIENT", "connection reset after the write");
    };
    const done = await settle(await rig.runtime.confirm(view.runId, { stepId: "create", decision: "approve" }));
    expect(done.view.status).toBe("completed");
    expect(calls).toBe(2);
    const create = stepOf(done.view, "create");
    expect(create.attempts).toBe(2);
    expect(create.output).toMatchObject({ created: false });
    const rows = await records();
    expect(rig.store.writes - before).toBe(1);
    expect(rows.map((r) => r.id)).toEqual((create.output as { recordIds: string[] }).recordIds);
    expect(rows).toHaveLength(rowsOf(stepOf(done.view, "split").output as { tasks: Task[] }).length);
  });

  test("another workspace's table cannot be described or written to", async () => {
    const a = await startChain();
    const plan = approvalPlan();
    const other = await settle(
      rig.runtime.run(plan, {
        workspaceId: "intruder",
        context: { goal: GOAL, table: { id: a.table.id }, startDate: "2026-12-21", holidays: [] },
      }),
    );
    expect(stepOf(other.view, "schema")).toMatchObject({ status: "failed", error: { code: "TABLE_NOT_FOUND" } });
    expect(stepOf(other.view, "create").status).not.toBe("completed");
    expect(await a.records()).toEqual([]);
  });

  test("issue 21: a run in another workspace, completing a records step with a fallback value naming A's records, then failing, deletes nothing of A", async () => {
    const a = await startChain();
    const planted = await rig.store.createRecords(a.ws, a.table.id, [{ title: "A's record" }], `manual-${a.ws}`);
    const recordId = planted.records[0]!.id;
    const intruder = `ws-${++wsSeq}`;
    const own = await rig.store.ensureWorkspace(intruder);
    // the write fails (its store is down), the fallback value claims to have written A's record
    rig.store.faults.beforeWrite = () => {
      throw new ToolchainError("EXECUTION_FAILED", "the table store is down", { effectStarted: false });
    };
    const claimed = { tableId: a.table.id, recordIds: [recordId], records: [{ id: recordId }], created: true };
    const plan = {
      onFailure: "fail_fast",
      steps: [
        {
          stepId: "create",
          skillName: "qtable.task.records.create",
          arguments: { tableId: own.id, records: [{ title: "x" }] },
          retry: { maxAttempts: 1 },
          fallback: { value: claimed },
        },
        {
          stepId: "boom",
          skillName: "core.fail",
          dependsOn: ["create"],
          arguments: { code: "EXECUTION_FAILED", message: "now roll back" },
          retry: { maxAttempts: 1 },
        },
      ],
    };
    let done = await settle(rig.runtime.run(plan, { workspaceId: intruder }));
    if (done.view.status === "waiting_confirmation")
      done = await settle(await rig.runtime.confirm(done.view.runId, { stepId: "create", decision: "approve" }));
    expect(stepOf(done.view, "create")).toMatchObject({ usedFallback: true, output: claimed });
    // a fallback value is not the record of an effect: nothing to undo (and nothing of A is touched)
    expect(stepOf(done.view, "create").rollback).toMatchObject({ status: "not_needed" });
    expect(done.view.status).toBe("failed"); // nothing was undone: the run failed
    // A's record is intact
    expect((await a.records()).map((r) => [r.id, r.values.title])).toEqual([[recordId, "A's record"]]);
  });

  test("compensation deletes what the step's own write created, not what its output names", async () => {
    const a = await startChain();
    const keep = await rig.store.createRecords(a.ws, a.table.id, [{ title: "keep" }], `manual-${a.ws}`);
    const skill = rig.runtime.registry.get("qtable.task.records.create")!;
    const created = await rig.store.createRecords(a.ws, a.table.id, [{ title: "mine" }], "run-x:create");
    // the output is tampered with: it names the record to keep
    const output = {
      tableId: a.table.id,
      recordIds: [keep.records[0]!.id],
      records: [{ id: keep.records[0]!.id }],
      created: true,
    };
    const cc = {
      runId: "run-x",
      stepId: "create",
      effectKey: "run-x:create",
      idempotencyKey: "run-x:create:compensate",
      workspaceId: a.ws,
      signal: new AbortController().signal,
      logger: silent,
      input: {},
      output,
    };
    await skill.createdRecords!.delete(skill.createdRecords!.list(output, {}), cc);
    expect((await a.records()).map((r) => r.id)).toEqual([keep.records[0]!.id]);
    expect(created.records).toHaveLength(1);
    // in another workspace the same call deletes nothing at all
    const again = await rig.store.createRecords(a.ws, a.table.id, [{ title: "mine" }], "run-y:create");
    await skill.createdRecords!.delete([], {
      ...cc,
      runId: "run-y",
      effectKey: "run-y:create",
      workspaceId: "elsewhere",
    });
    expect((await a.records()).map((r) => r.id)).toEqual([keep.records[0]!.id, again.records[0]!.id]);
  });

  test("garbage cannot reach a table: INVALID_INPUT names the record and field, nothing is written", async () => {
    const ws = `ws-${++wsSeq}`;
    const t = await rig.store.ensureWorkspace(ws);
    const plan = {
      steps: [
        {
          stepId: "create",
          skillName: "qtable.task.records.create",
          arguments: {
            tableId: t.id,
            records: [
              { title: "fine", start: "2026-12-21" },
              { title: "bad", start: "next week" },
            ],
          },
          retry: { maxAttempts: 1 },
        },
      ],
    };
    const { view } = await settle(rig.runtime.run(plan, { workspaceId: ws }));
    expect(stepOf(view, "create")).toMatchObject({
      status: "failed",
      error: {
        code: "INVALID_INPUT",
        message: 'record 1 ("bad"), field "start": field "start" is a date: expected YYYY-MM-DD, got "next week"',
      },
    });
    expect((await rig.store.listRecords(ws, t.id))!.records).toEqual([]);
  });

  test("notify: needs confirmation, sends once; strict mode refuses it unless the step accepts no compensation", async () => {
    const ws = `ws-${++wsSeq}`;
    const step = {
      stepId: "tell",
      skillName: "qtable.notify.send",
      arguments: { channel: "#approvals", message: "tasks are in" },
    };
    expect(() => rig.runtime.validate({ rollbackMode: "strict", steps: [step] })).toThrow(
      expect.objectContaining({ code: "NOT_COMPENSABLE" }),
    );
    const first = await settle(
      rig.runtime.run(
        { rollbackMode: "strict", steps: [{ ...step, acceptNoCompensation: true }] },
        { workspaceId: ws },
      ),
    );
    expect(first.view.pendingConfirmations[0]).toMatchObject({
      stepId: "tell",
      preview: { action: "send_message", channel: "#approvals", message: "tasks are in" },
    });
    expect(await rig.store.listMessages(ws)).toEqual([]);
    const done = await settle(await rig.runtime.confirm(first.view.runId, { stepId: "tell", decision: "approve" }));
    expect(done.view.status).toBe("completed");
    const msgs = await rig.store.listMessages(ws);
    expect(msgs).toHaveLength(1);
    expect(stepOf(done.view, "tell").output).toMatchObject({ messageId: msgs[0]!.id, channel: "#approvals" });
  });
});
