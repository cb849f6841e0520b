/**
 * The database restarts in the middle of a run: the run continues from its checkpoint once the
 * database is back, and nothing is half-written (no lost or duplicated events, no effect twice).
 */
import { afterAll, describe, expect, test } from "vitest";
import { openRuntime, type OpenedRuntime } from "../src/runtime/open.js";
import { TERMINAL_RUN } from "../src/kernel/status.js";
import { effectSkills } from "./fixtures/effect-skills.js";
import { waitFor } from "./helpers/wait.js";
import { privatePostgresAvailable, startPrivatePostgres, type PrivatePostgres } from "./helpers/private-postgres.js";

describe.runIf(privatePostgresAvailable)("Postgres restarted mid-run", () => {
  let pgsrv: PrivatePostgres | undefined;
  let opened: OpenedRuntime | undefined;
  afterAll(async () => {
    await opened?.close().catch(() => undefined);
    pgsrv?.stop();
  });

  test("the run continues from its checkpoint after the database comes back; history is consistent", async () => {
    pgsrv = startPrivatePostgres();
    opened = await openRuntime({ databaseUrl: pgsrv.url, schema: "toolchain", leaseTtlMs: 1_000, poolSize: 4 });
    const { runtime, db } = opened;
    const fx = await effectSkills(db.pool, "toolchain");
    for (const s of fx.skills) runtime.registry.register(s);
    const stopWorker = runtime.startWorker({ pollMs: 100 });

    // odd steps write to the database (non-idempotent, with reconcile); even steps only wait.
    // The restart happens while s2 waits, so no effect is cut in half: the run must complete.
    const steps = Array.from({ length: 8 }, (_, i) => ({
      stepId: `s${i}`,
      skillName: i % 2 ? "test.db_effect_rec" : "core.wait",
      dependsOn: i ? [`s${i - 1}`] : [],
      arguments: i % 2 ? { label: `s${i}`, ms: 100 } : { ms: i === 2 ? 1_500 : 250 },
    }));
    const h = runtime.run({ steps });
    h.result.catch(() => undefined); // this drive may die with the database; the worker takes over
    await waitFor(async () => (await runtime.getRun(h.runId)).steps[2]!.status === "running", {
      timeoutMs: 30_000,
      retryErrors: true,
      what: "s2 running",
    });
    pgsrv.restart();

    const settled = await waitFor(
      async () => {
        const row = await runtime.store.getRow(h.runId);
        return row && TERMINAL_RUN.has(row.status) && !row.leaseOwner ? row : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 100, retryErrors: true, what: "the run settled after the restart" },
    );
    await stopWorker();
    await runtime.drain();
    const view = await runtime.getRun(h.runId);
    expect(settled.status, JSON.stringify(view.steps.map((s) => [s.stepId, s.status, s.error?.message ?? null]))).toBe(
      "completed",
    );
    expect(view.status).toBe("completed");
    expect(view.steps.map((s) => s.status)).toEqual(Array(8).fill("completed"));
    // nothing half-written: the stored history equals the checkpointed state, events are gapless
    const stored = await runtime.store.getView(h.runId);
    expect(stored!.status).toBe(view.status);
    expect(stored!.steps.map((s) => [s.stepId, s.status])).toEqual(view.steps.map((s) => [s.stepId, s.status]));
    const events = await runtime.events(h.runId);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.type === "run_completed" || e.type === "run_failed")).toHaveLength(1);
    for (const s of view.steps.filter((x) => x.status === "completed"))
      expect(events.filter((e) => e.type === "step_completed" && e.stepId === s.stepId)).toHaveLength(1);
    // no effect twice
    const { rows } = await db.pool.query(
      `SELECT label, count(*)::int AS n FROM ${fx.table} GROUP BY label ORDER BY label`,
    );
    expect(rows.every((r: { n: number }) => r.n === 1)).toBe(true);
    expect(rows.map((r: { label: string }) => r.label)).toEqual(["s1", "s3", "s5", "s7"]);
  }, 120_000);
});
