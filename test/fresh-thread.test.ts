/**
 * A new run's first checkpoint read answered without a query (src/runtime/fresh-thread.ts): only
 * the first read carrying the drive's token, only for the root namespace and the latest
 * checkpoint; every other read (a resume, a later drive, a getState) reads the saver, so a run
 * that has checkpoints is never started again from nothing.
 */
import { MemorySaver } from "@langchain/langgraph";
import { describe, expect, test } from "vitest";
import { answerFreshThreads, FRESH_THREAD_KEY, freshThreadKey } from "../src/runtime/fresh-thread.js";
import { countStatements } from "../src/store/commit-points.js";
import { EffectLedger, effectSkill } from "./helpers/skills.js";

describe("answerFreshThreads", () => {
  test("answers the first root read carrying a token, once; every other read goes to the saver", async () => {
    const reads: unknown[] = [];
    const saver = new MemorySaver();
    const real = saver.getTuple.bind(saver);
    saver.getTuple = async (c) => (reads.push(c.configurable), real(c));
    const wrapped = answerFreshThreads(saver);
    const token = freshThreadKey(true);
    expect(freshThreadKey(false)).toEqual({});
    expect(await wrapped.getTuple({ configurable: { thread_id: "t", ...token } })).toBeUndefined();
    expect(reads).toHaveLength(0);
    // the same token again (a node inherits the stream's config): the saver answers
    await wrapped.getTuple({ configurable: { thread_id: "t", ...token } });
    expect(reads).toHaveLength(1);
    // a subgraph's namespace or a given checkpoint id: never answered from a token
    const other = freshThreadKey(true);
    await wrapped.getTuple({ configurable: { thread_id: "t", checkpoint_ns: "sub", ...other } });
    await wrapped.getTuple({ configurable: { thread_id: "t", checkpoint_id: "c1", ...other } });
    await wrapped.getTuple({ configurable: { thread_id: "t" } });
    expect(reads).toHaveLength(4);
    expect((other[FRESH_THREAD_KEY] as { used: boolean }).used).toBe(false);
  });
});

describe("on the database: which drives read their checkpoint", () => {
  test("a resumed run's drive reads its checkpoint (no token): nothing before the wait runs again, the confirmed step runs once", async () => {
    const { openRuntime } = await import("../src/runtime/open.js");
    const ledger = new EffectLedger();
    const o = await openRuntime({
      databaseUrl: process.env.DATABASE_URL || "",
      dataDir: ":memory:",
      schema: `ft_${Date.now().toString(36)}`,
      qtable: false,
      skills: [effectSkill(ledger, { name: "t.send" })],
    });
    try {
      const plan = {
        steps: [
          { stepId: "a", skillName: "t.send", arguments: { label: "a" } },
          { stepId: "b", skillName: "t.send", arguments: { label: "b" }, dependsOn: ["a"], requireConfirmation: true },
        ],
      };
      const h = o.runtime.run(plan);
      expect((await h.result).status).toBe("waiting_confirmation");
      const count = countStatements(o.db.pool);
      const done = await (await o.runtime.confirm(h.runId, { stepId: "b", decision: "approve" })).result;
      count.stop();
      expect(done.status).toBe("completed");
      expect(count.checkpointReads).toBeGreaterThanOrEqual(1);
      expect(ledger.log).toEqual(["effect:a", "effect:b"]);
      expect(done.steps.map((s) => [s.stepId, s.status, s.attempts])).toEqual([
        ["a", "completed", 1],
        ["b", "completed", 1],
      ]);
    } finally {
      if (process.env.DATABASE_URL)
        await o.db.pool.query(`DROP SCHEMA IF EXISTS "${o.db.schema}" CASCADE`).catch(() => undefined);
      await o.close();
    }
  }, 120_000);
});
