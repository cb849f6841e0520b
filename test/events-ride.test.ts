/**
 * A node's events in its writes' statement (src/runtime/events-ride.ts), on the database: only a
 * drive's root node writes are claimed; the writes and the events commit together or not at all;
 * a ride whose condition fails (the run row not as the drive left it) writes nothing and the drive
 * stores the events first, then the writes; a ride whose statement fails stops the drive, which is
 * re-driven and completes with its non-idempotent effect once and every event once.
 */
import { randomUUID } from "node:crypto";
import { MemorySaver, type BaseCheckpointSaver } from "@langchain/langgraph";
import { describe, expect, test } from "vitest";
import { rideNodeWrites } from "../src/runtime/events-ride.js";
import { EVENTS_RIDE_KEY, type NodeRides, type PutWrites } from "../src/kernel/node-rides.js";
import { countStatements, TASK_RESULT } from "../src/store/commit-points.js";
import type { StatementRider } from "../src/store/statement-rider.js";
import type { AppendRider } from "../src/store/run-store.js";
import type { Skill } from "../src/skills/contract.js";
import { EffectLedger, effectSkill } from "./helpers/skills.js";
import { closing, openOwnRuntime, type OwnRuntime } from "./helpers/own-runtime.js";

describe("rideNodeWrites", () => {
  test("claims a drive's root writes for the ride their node offered; other writes, and savers that cannot carry events, are untouched", async () => {
    expect(rideNodeWrites(new MemorySaver())).toBeInstanceOf(MemorySaver); // no putWritesWith: as is
    const seen: [string, StatementRider | undefined][] = [];
    const saver = new MemorySaver() as MemorySaver & { putWritesWith: (...a: unknown[]) => Promise<void> };
    saver.putWritesWith = async (...a: unknown[]) => void seen.push([a[2] as string, a[3] as StatementRider]);
    const plain: string[] = [];
    saver.putWrites = async (_c, _w, taskId) => void plain.push(taskId);
    const wrapped = rideNodeWrites(saver as unknown as BaseCheckpointSaver);
    const rider: StatementRider = { params: [], sql: () => ({ ctes: "", select: "" }), committed: () => undefined };
    const rides: NodeRides = {
      offer: () => true,
      claim: (taskId: string, put: PutWrites) => (taskId === "node" ? put(rider) : undefined),
      rideTask: () => undefined,
    };
    const write = (taskId: string, configurable: Record<string, unknown>) =>
      wrapped.putWrites({ configurable: { thread_id: "t", checkpoint_id: "c", ...configurable } }, [["x", 1]], taskId);
    await write("node", { [EVENTS_RIDE_KEY]: rides });
    await write("task", { [EVENTS_RIDE_KEY]: rides }); // a task its node offered nothing for
    await write("node", { [EVENTS_RIDE_KEY]: rides, checkpoint_ns: "sub" }); // a subgraph's
    await write("node", {}); // outside a drive (the LangGraph server, updateState)
    expect(seen).toEqual([["node", rider]]);
    expect(plain).toEqual(["task", "node", "node"]);
  });
});

const open = (skills: Skill[] = []) =>
  openOwnRuntime("er", skills, { driveRetry: { maxFailures: 3, initialMs: 10, maxMs: 20 } });
type Opened = OwnRuntime;

/** The store's riders, changed by `change` (the store is the runtime's: its drives ask it). */
function changeRiders(o: Opened, change: (r: AppendRider) => AppendRider) {
  const store = o.runtime.store as { appendRider?: (...a: never[]) => AppendRider | undefined };
  const orig = store.appendRider!.bind(store);
  store.appendRider = (...a: never[]) => {
    const r = orig(...a);
    return r && change(r);
  };
}

async function eventsOf(o: Opened, runId: string) {
  const events = await o.runtime.store.list(runId);
  return { keys: events.map((e) => e.key), seqs: events.map((e) => e.seq) };
}

const plan = {
  steps: [
    { stepId: "a", skillName: "t.send", arguments: { label: "a" } },
    { stepId: "b", skillName: "t.send", arguments: { label: "b" }, dependsOn: ["a"] },
  ],
};

/** Runs tried for one whose node's events ride (timing decides; idle, the first one does). */
const RIDE_TRIES = 8;

describe("on the database", () => {
  test("a ride whose condition fails writes nothing; the events are stored first, then the writes; the run completes with every event once", async () => {
    const ledger = new EffectLedger();
    const o = await open([effectSkill(ledger, { name: "t.send" })]);
    await closing(o, async () => {
      // the hint the condition checks (the run row's last seq) made stale: it cannot hold
      changeRiders(o, (r) => ({ ...r, params: r.params.map((p, i) => (i === 9 ? -1 : p)) }));
      // whether a node's events are still unstored when it ends is timing (a flush may have cut
      // them first: under load it often has), so runs repeat until one rode; every run must hold
      // the rest: effects once, every event once, the run completed and released
      let rode = false;
      for (let i = 0; i < RIDE_TRIES && !rode; i++) {
        const from = ledger.log.length;
        const count = countStatements(o.db.pool);
        const h = o.runtime.run(plan);
        const v = await h.result;
        count.stop();
        expect(v.status).toBe("completed");
        expect(ledger.log.slice(from)).toEqual(["effect:a", "effect:b"]);
        // the node ride's statement, then the events on their own, then the writes on their own (a
        // task result's ride, marked ride.task_result, goes the other way round: its result first)
        const at = count.statements.findIndex(
          (w) =>
            w.includes("insert.checkpoint_writes") &&
            w.includes("insert.tool_chain_event_logs") &&
            !w.includes(TASK_RESULT),
        );
        if (at >= 0) {
          rode = true;
          const after = count.statements.slice(at + 1);
          const append = after.findIndex((w) => w.includes("insert.tool_chain_event_logs"));
          const writes = after.findIndex((w) => w.length === 1 && w[0] === "insert.checkpoint_writes");
          expect(append, JSON.stringify(count.statements)).toBeGreaterThanOrEqual(0);
          expect(writes, JSON.stringify(count.statements)).toBeGreaterThan(append);
        }
        const { keys, seqs } = await eventsOf(o, h.runId);
        expect(new Set(keys).size).toBe(keys.length);
        expect(seqs).toEqual(keys.map((_, i) => i + 1));
        expect(keys.filter((k) => k.startsWith("run_completed"))).toHaveLength(1);
        expect((await o.runtime.store.getView(h.runId))?.status).toBe("completed");
        expect(await o.runtime.store.getRow(h.runId)).toMatchObject({ status: "completed", leaseOwner: null });
      }
      expect(rode, `no run of ${RIDE_TRIES} carried its node's events in its writes' statement`).toBe(true);
    });
  }, 120_000);

  test("a ride whose statement fails commits neither; the drive fails, is re-driven and completes: its non-idempotent effects once, every event once", async () => {
    const ledger = new EffectLedger();
    const o = await open([effectSkill(ledger, { name: "t.send" })]);
    await closing(o, async () => {
      // the first ride's statement fails after its CTEs ran, as a serialization failure would
      // (transient: a permanent error, say a division by zero, fails the run at once)
      await o.db.pool.query(
        `CREATE FUNCTION "${o.db.schema}".transient_failure() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'could not serialize' USING ERRCODE = '40001'; END $$`,
      );
      // the first ride whose statement is composed (sent), not the first one offered: under load a
      // rider can be made and then left unused (its batch cut as a flush), which once let the run
      // pass without any ride failing (CI, load 6-8)
      let failedOne = false;
      changeRiders(o, (r) => ({
        ...r,
        sql: (base) => {
          if (failedOne) return r.sql(base);
          failedOne = true;
          return { ...r.sql(base), select: `SELECT "${o.db.schema}".transient_failure() AS runs` };
        },
      }));
      const failures: string[] = [];
      const record = o.runtime.store.recordDriveFailure.bind(o.runtime.store);
      o.runtime.store.recordDriveFailure = async (...a) => (failures.push(a[2].message), record(...a));
      // runs repeat until one's ride was sent (see the test above): that one fails once
      for (let i = 0; i < RIDE_TRIES && !failedOne; i++) {
        const from = ledger.log.length;
        const h = o.runtime.run(plan);
        await h.result.catch(() => undefined);
        // whether this call sees the first drive's failure or the re-drive's view, the run completes
        const done = await (async () => {
          for (let i = 0; i < 200; i++) {
            const row = await o.runtime.store.getRow(h.runId);
            if (row?.status === "completed" && !row.leaseOwner) return row;
            await new Promise((r) => setTimeout(r, 50));
          }
          throw new Error(
            `run did not complete: ${JSON.stringify(await o.runtime.store.getRow(h.runId))} ${JSON.stringify(await eventsOf(o, h.runId))}`,
          );
        })();
        expect(done.status).toBe("completed");
        expect(failures).toEqual(failedOne ? [expect.stringMatching(/could not serialize/)] : []);
        expect(ledger.log.slice(from)).toEqual(["effect:a", "effect:b"]);
        expect([...ledger.effects.values()].every((n) => n === 1)).toBe(true);
        const { keys, seqs } = await eventsOf(o, h.runId);
        expect(new Set(keys).size).toBe(keys.length);
        expect(seqs).toEqual(keys.map((_, i) => i + 1));
        for (const step of ["a", "b"])
          expect(keys.filter((k) => k.startsWith(`step_completed:${step}`))).toHaveLength(1);
        expect(keys.filter((k) => k.startsWith("run_completed"))).toHaveLength(1);
        expect((await o.runtime.getRun(h.runId))?.status).toBe("completed");
      }
      expect(failedOne, `no run of ${RIDE_TRIES} sent a ride's statement`).toBe(true);
    });
  }, 120_000);

  test("the writes and what rides with them commit together or not at all", async () => {
    const o = await open();
    await closing(o, async () => {
      const saver = o.saver as unknown as { putWritesWith: (...a: unknown[]) => Promise<void> } & BaseCheckpointSaver;
      const config = {
        configurable: { thread_id: `t-${randomUUID()}`, checkpoint_ns: "", checkpoint_id: randomUUID() },
      };
      let committed = 0;
      const rider = (ok: boolean, divisor: number): StatementRider => ({
        params: [divisor],
        guard: ok ? "true" : "false",
        sql: (base) => ({ ctes: `z AS (SELECT 1 / $${base + 1}::int AS v)`, select: "SELECT (SELECT v FROM z) AS v" }),
        committed: () => void committed++,
      });
      const stored = async () =>
        (
          await o.db.pool.query(
            `SELECT count(*)::int AS n FROM "${o.db.schema}".checkpoint_writes WHERE thread_id = $1`,
            [config.configurable.thread_id],
          )
        ).rows[0].n as number;
      await expect(saver.putWritesWith(config, [["x", 1]], "task-1", rider(true, 0))).rejects.toThrow(
        /division by zero/,
      );
      expect([committed, await stored()]).toEqual([0, 0]);
      await saver.putWritesWith(config, [["x", 1]], "task-1", rider(false, 1)); // its guard fails
      expect([committed, await stored()]).toEqual([1, 0]);
      await saver.putWritesWith(config, [["x", 1]], "task-1", rider(true, 1));
      expect([committed, await stored()]).toEqual([2, 1]);
    });
  }, 120_000);
});
