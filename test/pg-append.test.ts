/**
 * PgRunStore appends a drive's event batch in one statement when the run row is as this process
 * left it (src/store/pg-run-store.ts, appendFast). The hint it relies on can go stale: another
 * writer appended in between, an event of the batch is already stored, the lease moved. Each
 * case must fall back to the locked path: gapless numbering, no duplicate, lease fenced.
 */
import { describe, expect, it } from "vitest";
import { openDatabase } from "../src/store/db.js";
import { migrate } from "../src/store/migrations.js";
import { PgRunStore } from "../src/store/pg-run-store.js";
import { LeaseLostError } from "../src/store/run-store.js";
import type { EmittedEvent } from "../src/kernel/events.js";
import { freshSchema, serverUrl } from "./helpers/backends.js";

const ev = (type: EmittedEvent["type"], stepId: string, key = `${type}:${stepId}:`): EmittedEvent => ({
  type,
  stepId,
  at: new Date().toISOString(),
  data: {},
  key,
});

describe("event append: one statement, stale hints fall back", () => {
  it("numbers gaplessly across another writer, drops stored keys, and stays fenced by the lease", async () => {
    const db = await openDatabase({ url: serverUrl, schema: freshSchema("append") });
    try {
      await migrate(db);
      const mine = new PgRunStore(db);
      const other = new PgRunStore(db); // another process's store on the same database
      const runId = "r1";
      await mine.createRun({
        runId,
        workspaceId: "w",
        traceId: "t",
        plan: {
          steps: [
            { stepId: "a", skillName: "core.pass", dependsOn: [] },
            { stepId: "b", skillName: "core.pass", dependsOn: [] },
          ],
        } as never,
        context: {},
        memory: {},
      });
      expect(await mine.acquireLease(runId, "me", 60_000)).toBe(true);

      // the first batch after taking the lease: one statement, no transaction (the store's
      // transactions take a client with connect(); pool.query's own use passes a callback)
      const query = db.pool.query.bind(db.pool);
      const connect = db.pool.connect.bind(db.pool);
      let statements = 0;
      let transactions = 0;
      Object.assign(db.pool, {
        query: (...a: unknown[]) => (statements++, (query as (...x: unknown[]) => unknown)(...a)),
        connect: (...a: unknown[]) => (
          a.length === 0 && transactions++,
          (connect as (...x: unknown[]) => unknown)(...a)
        ),
      });
      expect((await mine.append(runId, [ev("step_started", "a", "step_started:a:1")], "me")).map((e) => e.seq)).toEqual(
        [1],
      );
      expect([statements, transactions]).toEqual([1, 0]);
      Object.assign(db.pool, { query, connect });
      // another writer moves last_seq under the hint
      expect((await other.append(runId, [ev("step_started", "b", "step_started:b:1")])).map((e) => e.seq)).toEqual([2]);
      // stale hint (last seq 1): nothing written by the fast statement, the locked path numbers 3
      expect((await mine.append(runId, [ev("step_completed", "a")], "me")).map((e) => e.seq)).toEqual([3]);
      // a batch holding an already stored key: only the fresh one is stored
      const again = await mine.append(runId, [ev("step_completed", "a"), ev("step_completed", "b")], "me");
      expect(again.map((e) => [e.key, e.seq])).toEqual([["step_completed:b:", 4]]);
      // in-batch repeats count once
      expect(
        (await mine.append(runId, [ev("run_completed", "a", "x"), ev("run_completed", "a", "x")], "me")).map(
          (e) => e.seq,
        ),
      ).toEqual([5]);

      const stored = await mine.list(runId);
      expect(stored.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
      expect(new Set(stored.map((e) => e.key)).size).toBe(5);
      const steps = await db.pool.query(
        `SELECT step_id, status FROM "${db.schema}".tool_chain_step_runs WHERE run_id = $1 ORDER BY step_id`,
        [runId],
      );
      expect(steps.rows).toEqual([
        { step_id: "a", status: "completed" },
        { step_id: "b", status: "completed" },
      ]);

      // the lease moved to another owner (expired and taken): the old owner's next batch is refused
      await db.pool.query(`UPDATE "${db.schema}".tool_chain_runs SET lease_owner = 'them' WHERE run_id = $1`, [runId]);
      await expect(mine.append(runId, [ev("step_started", "a", "late")], "me")).rejects.toBeInstanceOf(LeaseLostError);
      expect((await mine.list(runId)).length).toBe(5);
    } finally {
      if (db.kind === "server")
        await db.pool.query(`DROP SCHEMA IF EXISTS "${db.schema}" CASCADE`).catch(() => undefined);
      await db.close();
    }
  });
});
