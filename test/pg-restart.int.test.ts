/**
 * The database restarts in the middle of a run: the run either continues or fails clearly, and
 * nothing is half-written (no lost or duplicated events, no effect twice).
 */
import { afterAll, describe, expect, test } from "vitest";
import { openRuntime, type OpenedRuntime } from "../src/runtime/open.js";
import { effectSkills } from "./fixtures/effect-skills.js";
import { privatePostgresAvailable, startPrivatePostgres, type PrivatePostgres } from "./helpers/private-postgres.js";

describe.runIf(privatePostgresAvailable)("Postgres restarted mid-run", () => {
  let pgsrv: PrivatePostgres | undefined;
  let opened: OpenedRuntime | undefined;
  afterAll(async () => {
    await opened?.close().catch(() => undefined);
    pgsrv?.stop();
  });

  test("the run continues from its checkpoint after the database comes back; history is consistent", async () => {
    pgsrv = startPrivatePostgres(54_000 + Math.floor(Math.random() * 1_000));
    opened = await openRuntime({ databaseUrl: pgsrv.url, schema: "toolchain", leaseTtlMs: 1_000, poolSize: 4 });
    const { runtime, db } = opened;
    const fx = await effectSkills(db.pool, "toolchain");
    for (const s of fx.skills) runtime.registry.register(s);
    const stopWorker = runtime.startWorker({ pollMs: 100 });

    const steps = Array.from({ length: 8 }, (_, i) => ({
      stepId: `s${i}`,
      skillName: i % 2 ? "test.db_effect_rec" : "core.wait",
      dependsOn: i ? [`s${i - 1}`] : [],
      arguments: i % 2 ? { label: `s${i}`, ms: 100 } : { ms: 250 },
    }));
    const h = runtime.run({ steps });
    h.result.catch(() => undefined); // this drive dies with the database; the worker takes over
    for (;;) {
      const { rows } = await db.pool.query(`SELECT count(*)::int AS n FROM ${fx.table}`).catch(() => ({ rows: [{ n: 0 }] }));
      if (rows[0].n >= 2) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    pgsrv.restart();

    let status = "";
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const row = await runtime.store.getRow(h.runId).catch(() => undefined);
      status = row?.status ?? "";
      if (["completed", "failed", "rolled_back", "rollback_failed", "cancelled"].includes(status) && !row?.leaseOwner) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await stopWorker();
    await runtime.drain();
    const view = await runtime.getRun(h.runId);
    console.log("pg-restart outcome:", status, JSON.stringify(view.steps.map((s) => [s.stepId, s.status, s.error?.code ?? null, s.error?.message ?? null])));
    // continues, or fails clearly: a step that was talking to the database when it went away
    // failed with its own error (a non-idempotent write is not retried blindly)
    expect(["completed", "failed"]).toContain(status);
    if (status === "completed") expect(view.steps.every((s) => s.status === "completed")).toBe(true);
    else {
      expect(view.error).not.toBeNull();
      const failed = view.steps.filter((s) => s.status === "failed");
      expect(failed).toHaveLength(1);
      expect(failed[0]!.error!.message).toMatch(/terminat|connect|shut|ECONNRE/i);
    }
    // nothing half-written: the stored history equals the checkpointed state, events are gapless
    const stored = await runtime.store.getView(h.runId);
    expect(stored!.status).toBe(view.status);
    expect(stored!.steps.map((s) => [s.stepId, s.status])).toEqual(view.steps.map((s) => [s.stepId, s.status]));
    const events = await runtime.events(h.runId);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.type === "run_completed" || e.type === "run_failed")).toHaveLength(1);
    for (const s of view.steps.filter((x) => x.status === "completed")) expect(events.filter((e) => e.type === "step_completed" && e.stepId === s.stepId)).toHaveLength(1);
    // no effect twice
    const { rows } = await db.pool.query(`SELECT label, count(*)::int AS n FROM ${fx.table} GROUP BY label ORDER BY label`);
    expect(rows.every((r: { n: number }) => r.n === 1)).toBe(true);
    if (status === "completed") expect(rows.map((r: { label: string }) => r.label)).toEqual(["s1", "s3", "s5", "s7"]);
  }, 120_000);
});
