/**
 * Limits across processes: worker processes sharing one server Postgres never overlap on a serial
 * key and never exceed a resource limit (spans recorded by the skills with the database clock),
 * and a process killed while holding a key releases it within the lease time. Several processes
 * on one database need the server (an embedded database belongs to one process).
 */
import { afterAll, describe, expect, test } from "vitest";
import pg from "pg";
import { openRuntime } from "../src/runtime/open.js";
import { serverUrl } from "./helpers/backends.js";
import { sharedStorage, spawnChild, type Child } from "./helpers/child.js";
import { effectSkills } from "./fixtures/effect-skills.js";
import { waitFor } from "./helpers/wait.js";

interface SpanRow {
  key: string;
  run_id: string;
  pid: number;
  started_at: Date;
  finished_at: Date | null;
}

function maxOverlap(rows: readonly SpanRow[]): number {
  const pts = rows
    .flatMap((r) => [[r.started_at.getTime(), 1] as const, [r.finished_at!.getTime(), -1] as const])
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let cur = 0;
  let max = 0;
  for (const [, d] of pts) max = Math.max(max, (cur += d));
  return max;
}

describe.runIf(serverUrl)("limits across processes on one server Postgres", () => {
  const st = serverUrl ? sharedStorage() : undefined;
  const children: Child[] = [];
  afterAll(async () => {
    for (const c of children) c.proc.kill("SIGKILL");
    const pool = new pg.Pool({ connectionString: serverUrl, max: 1 });
    await pool.query(`DROP SCHEMA IF EXISTS "${st!.schema}" CASCADE`).catch(() => undefined);
    await pool.end();
  });

  test("2 and 10 runs on two worker processes: never two on one key, never above the provider's limit", async () => {
    const api = await openRuntime({ databaseUrl: serverUrl, schema: st!.schema, poolSize: 2 });
    try {
      const fx = await effectSkills(api.db.pool, st!.schema);
      for (const s of fx.skills) api.runtime.registry.register(s);
      // each worker holds at most 5 runs, so 10 runs spread over both; a run lease long enough that
      // no run changes hands on a loaded machine (each step then runs exactly once)
      const w1 = spawnChild(st!, ["worker"], { WORKER_MAX_ACTIVE: "5", LEASE_TTL_MS: "10000" });
      const w2 = spawnChild(st!, ["worker"], { WORKER_MAX_ACTIVE: "5", LEASE_TTL_MS: "10000" });
      children.push(w1, w2);
      await Promise.all([w1.waitFor((l) => "worker" in l), w2.waitFor((l) => "worker" in l)]);
      for (const n of [2, 10]) {
        const ids: string[] = [];
        for (let i = 0; i < n; i++) {
          const plan = {
            steps: [
              { stepId: "w", skillName: "test.db_serial", arguments: { key: `table-${n}`, ms: 30 } },
              { stepId: "p1", skillName: "test.db_limited", arguments: { key: "-", ms: 40 } },
              { stepId: "p2", skillName: "test.db_limited", arguments: { key: "-", ms: 40 } },
            ],
          };
          ids.push((await api.runtime.submit(plan)).runId);
        }
        await waitFor(
          async () =>
            Number(
              (
                await api.db.pool.query(
                  `SELECT count(*) FROM "${st!.schema}".tool_chain_runs WHERE run_id = ANY($1) AND status = 'completed'`,
                  [ids],
                )
              ).rows[0].count,
            ) === n,
          { timeoutMs: 90_000, intervalMs: 100, what: `${n} runs completed` },
        );
        const { rows } = await api.db.pool.query<SpanRow>(
          `SELECT key, run_id, pid, started_at, finished_at FROM "${st!.schema}".test_spans WHERE run_id = ANY($1)`,
          [ids],
        );
        const table = rows.filter((r) => r.key === `table-${n}`);
        const provider = rows.filter((r) => r.key === "provider");
        expect(table).toHaveLength(n);
        expect(provider).toHaveLength(2 * n);
        expect(maxOverlap(table)).toBe(1);
        expect(maxOverlap(provider)).toBeLessThanOrEqual(2);
        if (n === 10) expect(new Set(rows.map((r) => r.pid)).size).toBe(2); // both processes took part
      }
      // the workers stop here: nobody recovers the next test's killed run
      for (const w of [w1, w2]) w.proc.kill("SIGKILL");
      await Promise.all([w1.exited, w2.exited]);
    } finally {
      await api.close();
    }
  }, 240_000);

  test("a process killed while holding a key releases it within the lease time", async () => {
    const a = spawnChild(st!, [
      "start",
      JSON.stringify({
        steps: [{ stepId: "hold", skillName: "test.db_serial", arguments: { key: "k-kill", ms: 120_000 } }],
      }),
      "run-holder",
    ]);
    children.push(a);
    await a.waitFor((l) => l.span === "k-kill", 60_000);
    // another process wants the key: it waits while the holder lives
    const b = spawnChild(st!, [
      "start",
      JSON.stringify({
        steps: [{ stepId: "next", skillName: "test.db_serial", arguments: { key: "k-kill", ms: 10 } }],
      }),
      "run-next",
    ]);
    children.push(b);
    await b.waitFor((l) => l.event === "step_waiting_for_limit", 60_000);
    a.proc.kill("SIGKILL");
    await a.exited;
    const killedAt = Date.now();
    const report = await b.waitFor((l) => "report" in l, 60_000);
    const r = report.report as { status: string; types: string[] };
    expect(r.status).toBe("completed");
    expect(r.types.indexOf("step_waiting_for_limit")).toBeLessThan(r.types.indexOf("step_started"));
    const pool = new pg.Pool({ connectionString: serverUrl, max: 1 });
    try {
      const { rows } = await pool.query<SpanRow>(
        `SELECT key, run_id, pid, started_at, finished_at FROM "${st!.schema}".test_spans WHERE key = 'k-kill' ORDER BY id`,
      );
      expect(rows.map((x) => x.run_id)).toEqual(["run-holder", "run-next"]);
      // the lease is LEASE_TTL_MS = 1000 (renewed every third of it): the key came free within
      // it after the kill (plus the waiter's poll and this loaded machine's scheduling), not before
      const waited = rows[1]!.started_at.getTime() - killedAt;
      expect(waited).toBeGreaterThan(-50);
      expect(waited).toBeLessThan(1_000 + 5_000);
    } finally {
      await pool.end();
    }
  }, 120_000);
});
