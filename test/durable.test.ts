/**
 * Durable-run behaviour shared by every backend: history tables, cross-process confirmation,
 * racing duplicate decisions, retention.
 */
import { afterEach, describe, expect, test } from "vitest";
import type { RunEvent, RunView } from "../src/index.js";
import { backfill } from "../src/runtime/driver.js";
import { backends } from "./helpers/backends.js";
import { approvalSkill, EffectLedger, Gates, gateSkill } from "./helpers/skills.js";
import { settle } from "./helpers/run.js";

const until = async (pred: () => Promise<boolean> | boolean, ms = 10_000) => {
  const t0 = Date.now();
  while (!(await pred())) {
    if (Date.now() - t0 > ms) throw new Error("condition not reached");
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe.each(backends)("durable runs on $name", (backend) => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
  });

  test("the history records every step's input, output, attempts and a gapless event log", async () => {
    const o = await backend.open();
    closers.push(o.close);
    const { view, events } = await settle(
      o.runtime.run({
        steps: [
          { stepId: "a", skillName: "core.pass", arguments: { value: { n: 1 } } },
          { stepId: "b", skillName: "core.fail", dependsOn: ["a"], arguments: { untilAttempt: 2, value: { $ref: "steps.a.n" } }, retry: { maxAttempts: 2, backoff: { kind: "fixed", initialMs: 1 } } },
        ],
      }),
    );
    expect(view.status).toBe("completed");
    const stored = await o.runtime.store.getView(view.runId);
    expect(stored!.status).toBe("completed");
    expect(stored!.steps.map((s) => [s.stepId, s.status, s.attempts, s.output])).toEqual([
      ["a", "completed", 1, { n: 1 }],
      ["b", "completed", 2, 1],
    ]);
    expect(stored!.steps[1]!.input).toEqual({ untilAttempt: 2, value: 1 });
    const logged = await o.runtime.events(view.runId);
    expect(logged.map((e) => e.seq)).toEqual(logged.map((_, i) => i + 1));
    expect(logged.map((e) => e.type)).toEqual(events.map((e) => e.type));
    expect(logged.filter((e) => e.type === "step_retrying")).toHaveLength(1);
    // the events a drive backfills after a crash carry the same keys as the real ones: nothing is added twice
    expect(await o.runtime.store.append(view.runId, backfill(view))).toEqual([]);
  });

  test("events lost by a crash before their flush are backfilled from the checkpointed state", async () => {
    const o = await backend.open();
    closers.push(o.close);
    const { view } = await settle(o.runtime.run({ steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: 1 } }, { stepId: "b", skillName: "core.fail", retry: { maxAttempts: 1 } }] }));
    const other = await o.runtime.store.getView(view.runId);
    const fresh = `${view.runId}-copy`;
    await o.runtime.store.createRun({ runId: fresh, workspaceId: "default", traceId: "t", plan: other!.plan, context: {}, memory: {} });
    const added = await o.runtime.store.append(fresh, backfill({ ...view, runId: fresh }));
    expect(added.map((e) => [e.type, e.stepId ?? null])).toEqual([
      ["planning_started", null],
      ["planning_completed", null],
      ["step_completed", "a"],
      ["step_failed", "b"],
      ["run_failed", null],
    ]);
    expect((await o.runtime.store.getRow(fresh))!.status).toBe("failed");
  });

  test("racing duplicate confirmations resume the run once", async () => {
    const ledger = new EffectLedger();
    const o = await backend.open({ skills: [approvalSkill(ledger)] });
    closers.push(o.close);
    const { view } = await settle(o.runtime.run({ steps: [{ stepId: "pub", skillName: "test.publish", arguments: { title: "once" } }] }));
    expect(view.status).toBe("waiting_confirmation");
    const handles = await Promise.all(Array.from({ length: 5 }, () => o.runtime.confirm(view.runId, { stepId: "pub", decision: "approve" })));
    const views = await Promise.all(handles.map((h) => h.result));
    expect(views.every((v) => v.status === "completed")).toBe(true);
    expect(ledger.total()).toBe(1);
    // a different decision after the fact is refused
    await expect(o.runtime.confirm(view.runId, { stepId: "pub", decision: "reject" })).rejects.toMatchObject({ code: "CONFIRMATION_NOT_PENDING" });
  });

  test("a confirmation served by another process reaches the run while it still executes other branches", async () => {
    const ledger = new EffectLedger();
    const gates = new Gates();
    const pair = await backend.openPair({ skills: [approvalSkill(ledger), gateSkill(gates, new Map())] });
    closers.push(async () => {
      gates.open("slow");
      await pair.close();
    });
    const h = pair.a.run({
      steps: [
        { stepId: "slow", skillName: "test.gate", arguments: { gate: "slow" } },
        { stepId: "pub", skillName: "test.publish", arguments: { title: "remote" } },
      ],
    });
    await until(async () => (await pair.b.store.getRow(h.runId))?.pendingConfirmations.length === 1);
    await pair.b.confirm(h.runId, { stepId: "pub", decision: "approve" });
    await until(() => ledger.total() === 1);
    expect(ledger.log).toEqual(["publish:remote"]);
    gates.open("slow");
    const view = await h.result;
    expect(view.status).toBe("completed");
    expect(ledger.total()).toBe(1);
  });

  test("a suspended run is resumed by the process that receives the decision", async () => {
    const ledger = new EffectLedger();
    const pair = await backend.openPair({ skills: [approvalSkill(ledger)] });
    closers.push(pair.close);
    const { view } = await settle(pair.a.run({ steps: [{ stepId: "pub", skillName: "test.publish", arguments: { title: "later" } }, { stepId: "after", skillName: "core.pass", dependsOn: ["pub"], arguments: { value: { $ref: "steps.pub.published" } } }] }));
    expect(view.status).toBe("waiting_confirmation");
    const done = await settle(await pair.b.confirm(view.runId, { stepId: "pub", decision: "approve" }));
    expect(done.view.status).toBe("completed");
    expect(done.view.steps[1]!.output).toBe("later");
    expect(ledger.total()).toBe(1);
    expect((await pair.a.getRun(view.runId)).status).toBe("completed");
  });

  test("retention prunes checkpoints of finished runs; the history still answers", async () => {
    const o = await backend.open();
    closers.push(o.close);
    const { view } = await settle(o.runtime.run({ steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: "kept" } }] }));
    const before = await o.runtime.getRun(view.runId);
    const pruned = await o.runtime.pruneCheckpoints({ olderThanMs: -1_000 });
    expect(pruned).toEqual([view.runId]);
    expect(await o.runtime.pruneCheckpoints({ olderThanMs: -1_000 })).toEqual([]);
    const after = await o.runtime.getRun(view.runId);
    expect(after.status).toBe("completed");
    expect(after.steps.map((s) => [s.stepId, s.status, s.output])).toEqual(before.steps.map((s) => [s.stepId, s.status, s.output]));
    expect((await o.runtime.events(view.runId)).at(-1)!.type).toBe("run_completed");
  });
});
