/**
 * QTable suite: the reference chain (examples/approval-system.plan.json: split → (estimate ‖
 * describe schema) → Gantt → create records) end to end on embedded and server Postgres, each
 * run approved at once: time to the records confirmation, confirm → completed, the whole chain,
 * and sequential chains per second. Every run's records are counted (one write per run).
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { openRuntime } from "../src/runtime/open.js";
import { loadDemoPlan } from "../src/cli/demo.js";
import { emitLine, log, median, now, round, isMain } from "./timing.js";

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

export async function qtableSuite(opts: { quick: boolean }) {
  const serverUrl =
    process.env.DATABASE_URL || process.env.BENCH_SERVER_URL || "postgres://postgres@127.0.0.1:5432/test";
  const serverUp = await new pg.Pool({ connectionString: serverUrl, max: 1, connectionTimeoutMillis: 1_000 })
    .query("SELECT 1")
    .then(
      () => true,
      () => false,
    );
  const backends: { name: string; url?: string }[] = [
    { name: "embedded" },
    ...(serverUp ? [{ name: "server", url: serverUrl }] : []),
  ];
  const runs = opts.quick ? 5 : 20;
  const plan = loadDemoPlan();
  for (const b of backends) {
    const schema = `bench_${randomUUID().replace(/-/g, "").slice(0, 10)}`;
    const o = await openRuntime({ databaseUrl: b.url, dataDir: ":memory:", schema, poolSize: 10 });
    try {
      log(`qtable: ${b.name}`);
      const table = await o.tables!.ensureWorkspace("bench");
      const context = {
        goal: "Plan an approval system with multi-level sign-off, e-mail notifications and an audit log",
        table: { id: table.id },
        startDate: "2026-12-21",
        holidays: ["2026-12-25"],
      };
      const toWait: number[] = [];
      const toDone: number[] = [];
      const total: number[] = [];
      let records = 0;
      const t0 = now();
      for (let i = 0; i <= runs; i++) {
        const a = now();
        const waiting = await o.runtime.run(plan, { workspaceId: "bench", context }).result;
        if (waiting.status !== "waiting_confirmation")
          throw new Error(`expected the records confirmation, got ${waiting.status}`);
        const b2 = now();
        const done = await (await o.runtime.confirm(waiting.runId, { stepId: "create", decision: "approve" })).result;
        if (done.status !== "completed") throw new Error(`expected completed, got ${done.status}`);
        const c = now();
        if (i === 0) continue; // warm-up
        toWait.push(b2 - a);
        toDone.push(c - b2);
        total.push(c - a);
        records += (done.steps.find((s) => s.stepId === "create")!.output as { recordIds: string[] }).recordIds.length;
      }
      const stored = (await o.tables!.listRecords("bench", table.id, { limit: 1_000 }))!.records.length;
      emitLine({
        suite: "qtable-chain",
        db: b.name,
        runs,
        stepsPerRun: 5,
        toConfirmationMs: { p50: round(median(toWait), 1), p90: round(pct(toWait, 90), 1) },
        confirmToCompletedMs: { p50: round(median(toDone), 1), p90: round(pct(toDone, 90), 1) },
        chainMs: { p50: round(median(total), 1), p90: round(pct(total, 90), 1) },
        chainsPerSecond: round(runs / ((now() - t0) / 1000), 2),
        recordsPerRun: records / runs,
        recordsStoredIncludingWarmup: stored,
      });
    } finally {
      if (b.url) await o.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
      await o.close();
    }
  }
}

if (isMain("qtable")) {
  await qtableSuite({ quick: process.env.BENCH_QUICK === "1" });
  process.exit(0);
}
