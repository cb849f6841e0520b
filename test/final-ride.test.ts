/**
 * A run's final projection in its final checkpoint's statement (src/runtime/final-ride.ts): only
 * a drive's own root checkpoints are offered; only a run that ended with nothing left for its
 * drive rides; the checkpoint and the projection commit together or not at all; a run that waited
 * for a person ends through the ordinary sync, its effects once.
 */
import { randomUUID } from "node:crypto";
import { MemorySaver, type BaseCheckpointSaver } from "@langchain/langgraph";
import { describe, expect, test } from "vitest";
import { FINAL_RIDE_KEY, finalRideKey, rideFinalCheckpoints, type FinalRide } from "../src/runtime/final-ride.js";
import { countStatements } from "../src/store/commit-points.js";
import type { StatementRider } from "../src/store/statement-rider.js";
import type { Skill } from "../src/skills/contract.js";
import { EffectLedger, effectSkill } from "./helpers/skills.js";
import { closing, openOwnRuntime } from "./helpers/own-runtime.js";

const checkpoint = (id: string) => ({
  v: 4,
  id,
  ts: new Date().toISOString(),
  channel_values: { status: "completed" },
  channel_versions: {},
  versions_seen: {},
});

describe("rideFinalCheckpoints", () => {
  test("offers a drive's root checkpoints to its ride; other puts, and savers that cannot ride, are untouched", async () => {
    expect(rideFinalCheckpoints(new MemorySaver())).toBeInstanceOf(MemorySaver); // no putWith: as is
    const seen: (StatementRider | undefined)[] = [];
    const saver = new MemorySaver() as MemorySaver & { putWith: (...a: unknown[]) => Promise<unknown> };
    saver.putWith = async (...a: unknown[]) => (seen.push(a[4] as StatementRider | undefined), a[0]);
    const wrapped = rideFinalCheckpoints(saver as unknown as BaseCheckpointSaver);
    const asked: unknown[] = [];
    const rider: StatementRider = { params: [], sql: () => ({ ctes: "", select: "" }), committed: () => undefined };
    const ride: FinalRide = async (values) => (asked.push(values), rider);
    expect(finalRideKey(undefined)).toEqual({});
    const put = (configurable: Record<string, unknown>) =>
      wrapped.put({ configurable: { thread_id: "t", ...configurable } }, checkpoint(randomUUID()), {} as never, {});
    await put(finalRideKey(ride));
    await put({ ...finalRideKey(ride), checkpoint_ns: "sub" }); // a subgraph's checkpoint
    await put({}); // a put outside a drive (the LangGraph server, updateState)
    expect(asked).toEqual([{ status: "completed" }]);
    expect(seen).toEqual([rider, undefined, undefined]);
    expect(FINAL_RIDE_KEY in finalRideKey(ride)).toBe(true);
  });
});

const open = (skills: Skill[] = []) => openOwnRuntime("fr", skills);

describe("on the database", () => {
  test("a run that ends without waiting: its final checkpoint's statement writes the run row, its step rows and releases the lease; no sync after it", async () => {
    const o = await open();
    await closing(o, async () => {
      const plan = { steps: [{ stepId: "s0", skillName: "core.pass", arguments: { value: 7 } }] };
      await o.runtime.run(plan).result; // warm-up
      const check = process.env.TOOLCHAIN_CHECK_STREAMED_VIEW;
      process.env.TOOLCHAIN_CHECK_STREAMED_VIEW = "0"; // its extra checkpoint read is not the run's
      const count = countStatements(o.db.pool);
      const h = o.runtime.run(plan);
      const v = await h.result.finally(() => (process.env.TOOLCHAIN_CHECK_STREAMED_VIEW = check));
      count.stop();
      expect(v.status).toBe("completed");
      // the statement of the final checkpoint carries the run row, its step rows and the release
      const ride = count.statements.findIndex(
        (w) => w.includes("insert.checkpoints") && w.includes("update.tool_chain_runs(status)"),
      );
      expect(ride, JSON.stringify(count.statements)).toBeGreaterThanOrEqual(0);
      expect(count.statements[ride]).toEqual(
        expect.arrayContaining([
          "insert.checkpoints",
          "update.tool_chain_runs(status)",
          "update.tool_chain_step_runs(status)",
        ]),
      );
      // after it, only the node's own task writes, which LangGraph stores beside its checkpoint on a
      // pool (they may commit after it, as in bare LangGraph); nothing of ours (no sync, no event batch)
      expect(
        count.statements
          .slice(ride + 1)
          .flat()
          .filter((w) => w !== "insert.checkpoint_writes"),
      ).toEqual([]);
      // nothing writes the run row after the checkpoint that ended it
      expect(count.statements.filter((w) => w.includes("update.tool_chain_runs(status)"))).toHaveLength(1);
      expect(await o.runtime.store.getRow(h.runId)).toMatchObject({ status: "completed", leaseOwner: null });
      const stored = await o.runtime.store.getView(h.runId);
      expect(stored?.steps.map((s) => [s.stepId, s.status, s.output])).toEqual([["s0", "completed", 7]]);
      expect((await o.runtime.getRun(h.runId))?.status).toBe("completed");
    });
  }, 120_000);

  test("a run that waited for a person: no checkpoint carries its projection (its resumed drive marks the decision applied after its sync); the effect happens once", async () => {
    const ledger = new EffectLedger();
    const o = await open([effectSkill(ledger, { name: "t.send" })]);
    await closing(o, async () => {
      const plan = {
        steps: [{ stepId: "b", skillName: "t.send", arguments: { label: "b" }, requireConfirmation: true }],
      };
      const count = countStatements(o.db.pool);
      const h = o.runtime.run(plan);
      expect((await h.result).status).toBe("waiting_confirmation");
      const done = await (await o.runtime.confirm(h.runId, { stepId: "b", decision: "approve" })).result;
      count.stop();
      expect(done.status).toBe("completed");
      expect(ledger.log).toEqual(["effect:b"]);
      expect(
        count.statements.some(
          (w) => w.includes("insert.checkpoints") && w.some((x) => x.startsWith("update.tool_chain_runs")),
        ),
      ).toBe(false);
      expect(await o.runtime.store.getRow(h.runId)).toMatchObject({ status: "completed", leaseOwner: null });
    });
  }, 120_000);

  test("the checkpoint and what rides with it commit together or not at all", async () => {
    const o = await open();
    await closing(o, async () => {
      const saver = o.saver as unknown as { putWith: (...a: unknown[]) => Promise<unknown> } & BaseCheckpointSaver;
      const config = { configurable: { thread_id: `t-${randomUUID()}`, checkpoint_ns: "" } };
      let committed = 0;
      const failing: StatementRider = {
        params: [0],
        // a write whose statement fails (division by zero) after the checkpoint's CTEs ran
        sql: (base) => ({ ctes: `z AS (SELECT 1 / $${base + 1}::int AS v)`, select: "SELECT (SELECT v FROM z) AS v" }),
        committed: () => void committed++,
      };
      await expect(saver.putWith(config, checkpoint(randomUUID()), { step: 0 }, {}, failing)).rejects.toThrow(
        /division by zero/,
      );
      expect(committed).toBe(0);
      expect(await saver.getTuple(config)).toBeUndefined();
      const ok: StatementRider = { ...failing, params: [1] };
      await saver.putWith(config, checkpoint(randomUUID()), { step: 0 }, {}, ok);
      expect(committed).toBe(1);
      expect(await saver.getTuple(config)).toBeDefined();
    });
  }, 120_000);
});
