/**
 * Durable-run behaviour shared by every backend: history tables, cross-process confirmation,
 * racing duplicate decisions, retention.
 */
import { afterEach, describe, expect, test } from "vitest";
import type { MemorySaver } from "@langchain/langgraph";
import type { RunEvent, RunView } from "../src/index.js";
import type { Runtime } from "../src/runtime/runtime.js";
import type { Database } from "../src/store/db.js";
import { backfill } from "../src/runtime/backfill.js";
import { backends } from "./helpers/backends.js";
import { approvalSkill, EffectLedger, Gates, gateSkill } from "./helpers/skills.js";
import { settle } from "./helpers/run.js";
import { waitFor } from "./helpers/wait.js";

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
          {
            stepId: "b",
            skillName: "core.fail",
            dependsOn: ["a"],
            arguments: { untilAttempt: 2, value: { $ref: "steps.a.n" } },
            retry: { maxAttempts: 2, backoff: { kind: "fixed", initialMs: 1 } },
          },
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
    const { view } = await settle(
      o.runtime.run({
        steps: [
          { stepId: "a", skillName: "core.pass", arguments: { value: 1 } },
          { stepId: "b", skillName: "core.fail", retry: { maxAttempts: 1 } },
        ],
      }),
    );
    const other = await o.runtime.store.getView(view.runId);
    const fresh = `${view.runId}-copy`;
    await o.runtime.store.createRun({
      runId: fresh,
      workspaceId: "default",
      traceId: "t",
      plan: other!.plan,
      context: {},
      memory: {},
    });
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
    const { view } = await settle(
      o.runtime.run({ steps: [{ stepId: "pub", skillName: "test.publish", arguments: { title: "once" } }] }),
    );
    expect(view.status).toBe("waiting_confirmation");
    const handles = await Promise.all(
      Array.from({ length: 5 }, () => o.runtime.confirm(view.runId, { stepId: "pub", decision: "approve" })),
    );
    const views = await Promise.all(handles.map((h) => h.result));
    expect(views.every((v) => v.status === "completed")).toBe(true);
    expect(ledger.total()).toBe(1);
    // a different decision after the fact is refused
    await expect(o.runtime.confirm(view.runId, { stepId: "pub", decision: "reject" })).rejects.toMatchObject({
      code: "CONFIRMATION_NOT_PENDING",
    });
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
    await waitFor(async () => (await pair.b.store.getRow(h.runId))?.pendingConfirmations.length === 1, {
      what: "pending confirmation visible to process b",
    });
    await pair.b.confirm(h.runId, { stepId: "pub", decision: "approve" });
    await waitFor(() => ledger.total() === 1, { what: "the publish effect" });
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
    const { view } = await settle(
      pair.a.run({
        steps: [
          { stepId: "pub", skillName: "test.publish", arguments: { title: "later" } },
          {
            stepId: "after",
            skillName: "core.pass",
            dependsOn: ["pub"],
            arguments: { value: { $ref: "steps.pub.published" } },
          },
        ],
      }),
    );
    expect(view.status).toBe("waiting_confirmation");
    const done = await settle(await pair.b.confirm(view.runId, { stepId: "pub", decision: "approve" }));
    expect(done.view.status).toBe("completed");
    expect(done.view.steps[1]!.output).toBe("later");
    expect(ledger.total()).toBe(1);
    expect((await pair.a.getRun(view.runId)).status).toBe("completed");
  });

  test("retention prunes checkpoints of finished runs (gone from the tables); waiting and young runs keep theirs; the history still answers", async () => {
    const o = await backend.open({ skills: [approvalSkill(new EffectLedger())] });
    closers.push(o.close);
    const old = (
      await settle(o.runtime.run({ steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: "kept" } }] }))
    ).view;
    const waiting = (
      await settle(
        o.runtime.run({ steps: [{ stepId: "pub", skillName: "test.publish", arguments: { title: "held" } }] }),
      )
    ).view;
    expect(waiting.status).toBe("waiting_confirmation");
    const cutoff = Date.now();
    await waitFor(() => Date.now() > cutoff + 50, { what: "the clock passing the cutoff" });
    const young = (
      await settle(o.runtime.run({ steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: "young" } }] }))
    ).view;
    for (const id of [old.runId, waiting.runId, young.runId])
      expect(await checkpointCount(o, id), id).toBeGreaterThan(0);
    const before = await o.runtime.getRun(old.runId);

    const pruned = await o.runtime.pruneCheckpoints({ olderThanMs: Date.now() - cutoff });
    expect(pruned).toEqual([old.runId]);
    expect(await o.runtime.pruneCheckpoints({ olderThanMs: Date.now() - cutoff })).toEqual([]);
    // the pruned run's checkpoints are gone (checkpoints, blobs and writes); the others keep theirs
    expect(await checkpointCount(o, old.runId)).toBe(0);
    expect(await checkpointCount(o, waiting.runId)).toBeGreaterThan(0);
    expect(await checkpointCount(o, young.runId)).toBeGreaterThan(0);
    // the history still answers for the pruned run, and the waiting run can still be resumed
    const after = await o.runtime.getRun(old.runId);
    expect(after.status).toBe("completed");
    expect(after.steps.map((s) => [s.stepId, s.status, s.output])).toEqual(
      before.steps.map((s) => [s.stepId, s.status, s.output]),
    );
    expect((await o.runtime.events(old.runId)).at(-1)!.type).toBe("run_completed");
    expect(
      (await settle(await o.runtime.confirm(waiting.runId, { stepId: "pub", decision: "approve" }))).view.status,
    ).toBe("completed");
  });
});

/** Rows the checkpointer holds for a run (its thread): Postgres tables, or the MemorySaver's maps. */
async function checkpointCount(
  o: { runtime: Runtime; db?: Database; schema?: string },
  runId: string,
): Promise<number> {
  if (o.db) {
    let n = 0;
    for (const t of ["checkpoints", "checkpoint_blobs", "checkpoint_writes"])
      n += Number(
        (await o.db.pool.query(`SELECT count(*) FROM "${o.schema}".${t} WHERE thread_id = $1`, [runId])).rows[0].count,
      );
    return n;
  }
  const saver = o.runtime["checkpointer"] as unknown as MemorySaver;
  return (
    Object.keys(saver.storage[runId] ?? {}).length +
    Object.keys(saver.writes).filter((k) => k.includes(`"${runId}"`)).length
  );
}
