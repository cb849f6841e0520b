/**
 * How many supersteps a run takes (each one a checkpoint plus its node's writes, the dominant
 * cost of a short run): counted from the run's checkpoints, so the count is deterministic and
 * cannot silently grow back. A run given its plan skips the planner, and the node whose superstep
 * ends the run writes its final status and terminal event (graphs/finish.ts), so a one-step run is
 * one superstep, like a one-node LangGraph graph. Round trips per run are the bench's
 * (bench/durable.ts, counted by src/store/commit-points.ts `countStatements`, tested here too).
 */
import { MemorySaver } from "@langchain/langgraph";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Planner, type PlanningOutcome } from "../src/planner/index.js";
import { Runtime } from "../src/runtime/runtime.js";
import { openDatabase, type Database } from "../src/store/db.js";
import { countStatements } from "../src/store/commit-points.js";
import { coreSkills } from "../skills/core/index.js";
import { SkillRegistry } from "../src/skills/registry.js";
import { EffectLedger, effectSkill } from "./helpers/skills.js";

/** Supersteps of a thread's nodes: LangGraph checkpoints the input (step -1), START (0), then each superstep. */
async function supersteps(saver: MemorySaver, runId: string): Promise<number> {
  let step = -1;
  for await (const c of saver.list({ configurable: { thread_id: runId } }))
    step = Math.max(step, c.metadata?.step ?? -1);
  return step;
}

/** Plans every request as one core.pass step, without a model; "fail" fails planning. */
class OneStepPlanner extends Planner {
  constructor() {
    super({ registry: new SkillRegistry(coreSkills), config: {} });
  }
  override async plan(input: { request: string }): Promise<PlanningOutcome> {
    if (input.request === "fail") throw new Error("no plan for that");
    return {
      plan: {
        steps: [{ stepId: "a", skillName: "core.pass", dependsOn: [], arguments: { value: 1 } }],
        onFailure: "skip_dependents",
        rollbackMode: "best_effort",
      } as never,
      planner: { kind: "fallback" } as never,
      warnings: [],
      repairRounds: 0,
      durationMs: 1,
    };
  }
}

describe("supersteps per run", () => {
  const saver = new MemorySaver();
  const ledger = new EffectLedger();
  const rt = new Runtime({
    checkpointer: saver,
    planner: new OneStepPlanner(),
    skills: [effectSkill(ledger, { idempotent: true })],
  });
  const terminal = async (runId: string) =>
    (await rt.events(runId)).filter((e) => e.type === "run_completed" || e.type === "run_failed");

  test("a one-step run given its plan is one superstep, with every lifecycle event once", async () => {
    const v = await rt.run({ steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: 1 } }] }).result;
    expect(v.status).toBe("completed");
    expect(await supersteps(saver, v.runId)).toBe(1);
    expect((await rt.events(v.runId)).map((e) => e.type)).toEqual([
      "planning_started",
      "planning_completed",
      "step_started",
      "step_completed",
      "run_completed",
    ]);
  });

  test("its nodes write only the channels they change: the accepted plan and the input's facts are not written again", async () => {
    const own = new MemorySaver();
    const written: string[][] = [];
    const putWrites = own.putWrites.bind(own);
    own.putWrites = async (c, writes, taskId) => {
      written.push(writes.map(([channel]) => channel));
      return putWrites(c, writes, taskId);
    };
    const run = new Runtime({ checkpointer: own, planner: new OneStepPlanner() });
    const v = await run.run({ steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: 1 } }] }).result;
    expect(v.status).toBe("completed");
    // the input's, then the scheduler task's return marker, then the scheduler node's own writes;
    // elapsedMs only when the run measured any time at all (a fast run's 0 is the value it holds)
    const state = (await own.getTuple({ configurable: { thread_id: v.runId } }))!.checkpoint.channel_values;
    const scheduler = [
      "admission",
      "completionOrder",
      "createdAt",
      "skillVersions",
      "status",
      "steps",
      "updatedAt",
      "workspaceId",
    ];
    if (state.elapsedMs !== 0) scheduler.push("elapsedMs");
    expect(written.map((w) => [...w].sort())).toEqual([
      ["branch:to:scheduler", "context", "memory", "plan", "runId"],
      ["__return__"],
      scheduler.sort(),
    ]);
    // and the run's state is whole all the same
    expect(state).toMatchObject({ runId: v.runId, status: "completed", completionOrder: ["a"], memory: {} });
    expect((state.plan as { steps: unknown[] }).steps).toHaveLength(1);
  });

  test("a chain given its plan is one superstep however long; a request adds the planner's", async () => {
    const steps = Array.from({ length: 20 }, (_, i) => ({
      stepId: `s${i}`,
      skillName: "core.pass",
      dependsOn: i ? [`s${i - 1}`] : [],
      arguments: { value: i },
    }));
    const chain = await rt.run({ steps }).result;
    expect(chain.status).toBe("completed");
    expect(await supersteps(saver, chain.runId)).toBe(1);
    const planned = await rt.runRequest("pass one along").result;
    expect(planned.status).toBe("completed");
    expect(await supersteps(saver, planned.runId)).toBe(2); // planner, scheduler
    expect(await terminal(planned.runId)).toHaveLength(1);
  });

  test("a run whose planning fails or that halts ends in the superstep that ends it, with one terminal event", async () => {
    const unplanned = await rt.runRequest("fail").result;
    expect(unplanned.status).toBe("failed");
    expect(await supersteps(saver, unplanned.runId)).toBe(1); // planner
    expect((await terminal(unplanned.runId)).map((e) => e.data.status)).toEqual(["failed"]);
    // fail_fast: b fails, a is undone in the compensation node's superstep, which ends the run
    const halted = await rt.run({
      onFailure: "fail_fast",
      steps: [
        { stepId: "a", skillName: "test.effect", arguments: { label: "a" } },
        { stepId: "b", skillName: "core.fail", dependsOn: ["a"], arguments: {} },
      ],
    }).result;
    expect(halted.status).toBe("rolled_back");
    expect(ledger.log).toEqual(["effect:a", "undo:a"]);
    expect(await supersteps(saver, halted.runId)).toBe(2); // scheduler, compensation
    expect((await terminal(halted.runId)).map((e) => e.data.status)).toEqual(["rolled_back"]);
  });
});

describe("round trips per run (the bench's count)", () => {
  let db: Database;
  beforeAll(async () => {
    db = await openDatabase({ url: process.env.DATABASE_URL || undefined });
  }, 60_000);
  afterAll(async () => db?.close());

  test("countStatements counts every statement on the pool, refused ones too, and checkpoint inserts apart", async () => {
    const count = countStatements(db.pool);
    await db.pool.query("SELECT 1");
    const client = await db.pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("CREATE TEMP TABLE checkpoints (id int)");
      await client.query("INSERT INTO checkpoints (id) VALUES (1)");
      await expect(client.query("SELECT no_such_column FROM checkpoints")).rejects.toThrow();
      await client.query("ROLLBACK");
    } finally {
      client.release();
    }
    count.stop();
    await db.pool.query("SELECT 2");
    expect(count).toMatchObject({ roundTrips: 6, checkpointPuts: 1, writes: { "insert.checkpoints": 1 } });
  });
});

describe("round trips of a trivial run", () => {
  test("a one-step run that never waits: 7 statements, as many as bare LangGraph's (recorded leased; no read of its empty thread; its events in its scheduler node's writes statement; its final projection, releasing the lease, in its final checkpoint's statement; no end-of-drive decisions query)", async () => {
    const { openRuntime } = await import("../src/runtime/open.js");
    const o = await openRuntime({
      databaseUrl: process.env.DATABASE_URL || "",
      dataDir: ":memory:",
      schema: `rt_${Date.now().toString(36)}`,
      // no decision poll inside the run: the count is deterministic
      decisionPollMs: 600_000,
    });
    try {
      const plan = { steps: [{ stepId: "s0", skillName: "core.pass", arguments: { value: 1 } }] };
      expect((await o.runtime.run(plan).result).status).toBe("completed"); // warm-up
      const check = process.env.TOOLCHAIN_CHECK_STREAMED_VIEW;
      process.env.TOOLCHAIN_CHECK_STREAMED_VIEW = "0"; // its extra checkpoint read is not the run's
      const count = countStatements(o.db.pool);
      const h = o.runtime.run(plan);
      const v = await h.result.finally(() => (process.env.TOOLCHAIN_CHECK_STREAMED_VIEW = check));
      count.stop();
      expect(v.status).toBe("completed");
      expect(count.roundTrips).toBe(7);
      // its thread is new (the run row was just inserted): LangGraph's first read is answered without a query
      expect(count.checkpointReads).toBe(0);
      // its four events (run and step started, step and run completed) in one append, one notify,
      // riding in the statement of the scheduler node's writes (events-ride.ts)
      expect(count.writes).toMatchObject({
        "insert.tool_chain_event_logs": 1,
        "call.pg_notify": 1,
        "insert.checkpoints": 3,
      });
      expect(count.statements.filter((w) => w.includes("insert.tool_chain_event_logs"))).toEqual([
        expect.arrayContaining(["insert.checkpoint_writes", "update.tool_chain_runs(last_seq)", "call.pg_notify"]),
      ]);
      // the run row and its step rows written once, by the final checkpoint's statement (final-ride.ts)
      expect(count.writes).toMatchObject({
        "update.tool_chain_runs(status)": 1,
        "update.tool_chain_runs(last_seq)": 1,
      });
      // the lease taken with the run row is gone with the final sync: any process may read or claim it
      expect(await o.runtime.store.getRow(h.runId)).toMatchObject({
        status: "completed",
        leaseOwner: null,
        leaseExpiresAt: null,
      });
    } finally {
      if (process.env.DATABASE_URL)
        await o.db.pool.query(`DROP SCHEMA IF EXISTS "${o.db.schema}" CASCADE`).catch(() => undefined);
      await o.close();
    }
  }, 120_000);
});
