/**
 * Scale-out: several worker processes share one server Postgres. Embedded PGlite is owned by
 * one process, so this suite needs the server (CI's server pass; DATABASE_URL).
 */
import { afterAll, describe, expect, test } from "vitest";
import pg from "pg";
import { openRuntime } from "../src/runtime/open.js";
import { serverUrl } from "./helpers/backends.js";
import { sharedStorage, spawnChild, type Child } from "./helpers/child.js";
import { effectSkills } from "./fixtures/effect-skills.js";
import { waitFor } from "./helpers/wait.js";

describe.runIf(serverUrl)("two worker processes on one server Postgres", () => {
  const st = serverUrl ? sharedStorage() : undefined;
  const children: Child[] = [];
  afterAll(async () => {
    for (const c of children) c.proc.kill("SIGKILL");
    const pool = new pg.Pool({ connectionString: serverUrl, max: 1 });
    await pool.query(`DROP SCHEMA IF EXISTS "${st!.schema}" CASCADE`).catch(() => undefined);
    await pool.end();
  });

  test("50 runs: each executed by one process at a time; killing a worker lets the other finish its runs; each effect once", async () => {
    const api = await openRuntime({ databaseUrl: serverUrl, schema: st!.schema, poolSize: 2 });
    // the API process only records runs (same skill pack for validation); workers execute them
    const fx0 = await effectSkills(api.db.pool, st!.schema);
    for (const s of fx0.skills) api.runtime.registry.register(s);
    const effects = fx0.table;
    const runIds: string[] = [];
    for (let i = 0; i < 50; i++) {
      const { runId } = await api.runtime.submit({
        steps: [
          { stepId: "one", skillName: "test.db_effect_rec", arguments: { label: `r${i}-one`, ms: 40 } },
          {
            stepId: "two",
            skillName: "test.db_effect_rec",
            dependsOn: ["one"],
            arguments: { label: `r${i}-two`, ms: 40 },
          },
          {
            stepId: "three",
            skillName: "test.db_effect_rec",
            dependsOn: ["two"],
            arguments: { label: `r${i}-three`, ms: 40 },
          },
        ],
      });
      runIds.push(runId);
    }
    // each worker holds at most 10 runs, so neither can take all 50: both get work whatever
    // order they start in, and the one killed holds runs mid-execution
    const w1 = spawnChild(st!, ["worker"], { WORKER_MAX_ACTIVE: "10" });
    const w2 = spawnChild(st!, ["worker"], { WORKER_MAX_ACTIVE: "10" });
    children.push(w1, w2);
    await Promise.all([w1.waitFor((l) => "worker" in l), w2.waitFor((l) => "worker" in l)]);
    const pid1 = w1.proc.pid!;

    const completed = async () =>
      Number(
        (await api.db.pool.query(`SELECT count(*) FROM "${st!.schema}".tool_chain_runs WHERE status = 'completed'`))
          .rows[0].count,
      );
    // kill worker 1 once it has done real work and runs are still pending
    await waitFor(
      async () =>
        Number((await api.db.pool.query(`SELECT count(*) FROM ${effects} WHERE pid = $1`, [pid1])).rows[0].count) >= 10,
      {
        timeoutMs: 60_000,
        intervalMs: 20,
        what: "worker 1 recorded 10 effects",
      },
    );
    w1.proc.kill("SIGKILL");
    await w1.exited;
    const killedAt = Date.now();
    expect(await completed()).toBeLessThan(50);

    await waitFor(async () => (await completed()) === 50, {
      timeoutMs: 90_000,
      intervalMs: 100,
      what: "all 50 runs completed by the survivor",
    });
    const { rows: statuses } = await api.db.pool.query(
      `SELECT status, count(*)::int AS n FROM "${st!.schema}".tool_chain_runs GROUP BY status`,
    );
    expect(statuses).toEqual([{ status: "completed", n: 50 }]);

    // every effect exactly once
    const { rows: fx } = await api.db.pool.query(
      `SELECT key, label, pid, started_at, finished_at FROM ${effects} ORDER BY id`,
    );
    const perLabel = new Map<string, number>();
    for (const e of fx) perLabel.set(e.label, (perLabel.get(e.label) ?? 0) + 1);
    expect(perLabel.size).toBe(150);
    expect([...perLabel.values()].every((n) => n === 1)).toBe(true);

    // one process at a time per run: a run touched by both workers moved to the survivor only after the kill
    const byRun = new Map<string, { pid: number; started: number }[]>();
    for (const e of fx) {
      const runId = String(e.key).split(":")[0]!;
      byRun.set(runId, [...(byRun.get(runId) ?? []), { pid: e.pid, started: new Date(e.started_at).getTime() }]);
    }
    let handedOver = 0;
    for (const [, execs] of byRun) {
      const pids = new Set(execs.map((x) => x.pid));
      if (pids.size === 1) continue;
      handedOver++;
      const lastByDead = Math.max(...execs.filter((x) => x.pid === pid1).map((x) => x.started));
      const firstBySurvivor = Math.min(...execs.filter((x) => x.pid !== pid1).map((x) => x.started));
      expect(firstBySurvivor).toBeGreaterThan(lastByDead);
      expect(firstBySurvivor).toBeGreaterThan(killedAt - 50);
    }
    expect(new Set(fx.map((e) => e.pid)).size).toBe(2);
    expect(handedOver).toBeGreaterThan(0);
    await api.close();
  }, 150_000);
});
