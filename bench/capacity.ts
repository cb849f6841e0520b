/**
 * Capacity model, server Postgres only (README "Benchmarks", "Scale-out"). Per run shape, what a
 * run costs, measured on this machine with `inFlight` runs at a time:
 *   - the database: statements (round trips, counted at src/store/commit-points.ts), WAL bytes
 *     (pg_current_wal_lsn before and after), bytes stored (relation sizes of the run's schema),
 *     notifications sent (event batches calling pg_notify), and Postgres' CPU seconds (every
 *     postgres process's utime + stime from /proc: the server runs on this machine);
 *   - the worker: this process's CPU seconds (process.cpuUsage).
 * From those inputs, a model of one Postgres server with C cores: the steps/s its CPU sustains
 * (C × UTIL ÷ Postgres CPU per step), the worker cores that rate needs (steps/s × worker CPU per
 * step), the WAL and NOTIFY rates it implies, and which limit comes first. The model is checked on
 * this machine: at saturation, (Postgres + worker CPU per step) × steps/s must be about its 2 cores.
 * `npx tsx bench/capacity.ts` (BENCH_QUICK=1 for a smoke test); DATABASE_URL or the local server.
 */
import { randomUUID } from "node:crypto";
import { cpus } from "node:os";
import { z } from "zod";
import { defineSkill } from "../src/skills/contract.js";
import { openRuntime, type OpenedRuntime } from "../src/runtime/open.js";
import { countStatements } from "../src/store/commit-points.js";
import { bareGraph } from "./durable.js";
import { bareChainGraph, chain, STEP_MS } from "./api-throughput.js";
import { noopPlan } from "./overhead.js";
import { postgresCpuSeconds } from "./procs.js";
import { emitLine, log, now, round, isMain } from "./timing.js";

/** Share of a Postgres server's cores the model lets runs use (the rest: vacuum, WAL writer, reads, headroom). */
const UTIL = 0.7;
/** Sustained WAL write bandwidth the model assumes for a server volume (a managed Postgres' gp3/pd-ssd class disk). */
const WAL_MB_PER_SEC = 200;
const gate = defineSkill({
  name: "bench.capacity_gate",
  description: "needs approval",
  input: z.object({}),
  sideEffects: "none",
  idempotent: true,
  requiresConfirmation: true,
  async execute() {
    return null;
  },
});

interface ShapeSpec {
  name: string;
  steps: number;
  /** One run to completion (the approval shape confirms its gate in between). */
  run(o: OpenedRuntime): Promise<void>;
}

const plain =
  (n: number, shape: "chain" | "fanout") =>
  async (o: OpenedRuntime): Promise<void> => {
    const v = await o.runtime.run(noopPlan(n, shape)).result;
    if (v.status !== "completed") throw new Error(`run ended ${v.status}`);
  };

/** Bare LangGraph (one node, one task() per step) on the runtime's own saver: the floor beside each shape. */
const bare =
  (n: number, shape: "chain" | "fanout") =>
  async (o: OpenedRuntime): Promise<void> => {
    await bareGraph(o.saver).invoke({ n, shape }, { configurable: { thread_id: randomUUID() } });
  };

/** Chains of steps that take time (STEP_MS each, as real skills do): each result is written apart. */
const timed = async (o: OpenedRuntime): Promise<void> => {
  const v = await o.runtime.run(chain(20, STEP_MS)).result;
  if (v.status !== "completed") throw new Error(`run ended ${v.status}`);
};
const bareTimedGraphs = new WeakMap<object, ReturnType<typeof bareChainGraph>>();
const bareTimed = async (o: OpenedRuntime): Promise<void> => {
  let g = bareTimedGraphs.get(o.saver);
  if (!g) bareTimedGraphs.set(o.saver, (g = bareChainGraph(o.saver)));
  await g.invoke({ n: 20 }, { configurable: { thread_id: randomUUID() } });
};

const SHAPES: ShapeSpec[] = [
  { name: "bare LangGraph: one-node graph, 1 task()", steps: 1, run: bare(1, "chain") },
  { name: "bare LangGraph: chain of 20 task()", steps: 20, run: bare(20, "chain") },
  { name: `bare LangGraph: chain of 20 task() of ${STEP_MS} ms`, steps: 20, run: bareTimed },
  { name: "trivial (1 step)", steps: 1, run: plain(1, "chain") },
  { name: "chain of 20", steps: 20, run: plain(20, "chain") },
  { name: "fan-out of 20", steps: 20, run: plain(20, "fanout") },
  { name: `chain of 20 core.wait steps of ${STEP_MS} ms`, steps: 20, run: timed },
  {
    name: "chain of 3, the middle one approved",
    steps: 3,
    async run(o) {
      const plan = {
        steps: [
          { stepId: "a", skillName: "core.pass", arguments: { value: 1 } },
          { stepId: "b", skillName: gate.name, dependsOn: ["a"] },
          { stepId: "c", skillName: "core.pass", dependsOn: ["b"], arguments: { value: 2 } },
        ],
      };
      const v = await o.runtime.run(plan).result;
      if (v.status !== "waiting_confirmation") throw new Error(`run ended ${v.status}`);
      const done = await (await o.runtime.confirm(v.runId, { stepId: "b", decision: "approve" })).result;
      if (done.status !== "completed") throw new Error(`run ended ${done.status}`);
    },
  },
];

async function walLsn(o: OpenedRuntime): Promise<string> {
  return (await o.db.pool.query<{ l: string }>("SELECT pg_current_wal_lsn()::text AS l")).rows[0]!.l;
}

/** Bytes stored by each table of the runtime's schema, with its indexes and TOAST. */
async function storedBytes(o: OpenedRuntime): Promise<Map<string, number>> {
  const { rows } = await o.db.pool.query<{ t: string; b: string }>(
    `SELECT c.relname AS t, pg_total_relation_size(c.oid)::bigint AS b FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`,
    [o.db.schema],
  );
  return new Map(rows.map((r) => [r.t, Number(r.b)]));
}

/** Growth per table from `before` to `after` (tables that grew only), and its sum. */
function growth(before: Map<string, number>, after: Map<string, number>) {
  const byTable: Record<string, number> = {};
  let total = 0;
  for (const [t, b] of after) {
    const d = b - (before.get(t) ?? 0);
    total += d;
    if (d > 0) byTable[t] = d;
  }
  return { total, byTable };
}

/** `runs` runs of a shape, `inFlight` at a time: what they cost per run and per step. */
async function measureShape(o: OpenedRuntime, s: ShapeSpec, runs: number, inFlight: number) {
  for (let i = 0; i < 3; i++) await s.run(o); // warm-up: compiled plans, pool connections
  const wal0 = await walLsn(o);
  const bytes0 = await storedBytes(o);
  const pg0 = postgresCpuSeconds();
  const cpu0 = process.cpuUsage();
  const count = countStatements(o.db.pool);
  const t0 = now();
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(inFlight, runs) }, async () => {
      while (next++ < runs) await s.run(o);
    }),
  );
  const seconds = (now() - t0) / 1000;
  count.stop();
  const cpu = process.cpuUsage(cpu0);
  const pgCpu = postgresCpuSeconds() - pg0;
  const wal = Number(
    (await o.db.pool.query<{ d: string }>("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::bigint AS d", [wal0]))
      .rows[0]!.d,
  );
  const { total: stored, byTable } = growth(bytes0, await storedBytes(o));
  const steps = runs * s.steps;
  const workerCpu = (cpu.user + cpu.system) / 1e6;
  return {
    shape: s.name,
    stepsPerRun: s.steps,
    runs,
    inFlight,
    seconds: round(seconds, 2),
    stepsPerSec: round(steps / seconds, 1),
    perRun: {
      statements: round(count.roundTrips / runs, 2),
      checkpointPuts: round((count.writes["insert.checkpoints"] ?? 0) / runs, 2),
      checkpointWriteBatches: round((count.writes["insert.checkpoint_writes"] ?? 0) / runs, 2),
      eventBatches: round((count.writes["insert.tool_chain_event_logs"] ?? 0) / runs, 2),
      notifies: round((count.writes["call.pg_notify"] ?? 0) / runs, 2),
      walBytes: Math.round(wal / runs),
      storedBytes: Math.round(stored / runs),
      storedBytesByTable: Object.fromEntries(Object.entries(byTable).map(([t, b]) => [t, Math.round(b / runs)])),
      postgresCpuMs: round((pgCpu * 1000) / runs, 3),
      workerCpuMs: round((workerCpu * 1000) / runs, 3),
    },
    perStep: {
      statements: round(count.roundTrips / steps, 2),
      walBytes: Math.round(wal / steps),
      storedBytes: Math.round(stored / steps),
      postgresCpuMs: round((pgCpu * 1000) / steps, 3),
      workerCpuMs: round((workerCpu * 1000) / steps, 3),
    },
    /** CPU busy on this machine while it ran, in cores: ≈ its core count when CPU-bound. */
    coresBusy: round((pgCpu + workerCpu) / seconds, 2),
  };
}

type Measured = Awaited<ReturnType<typeof measureShape>>;

/**
 * Calibration: what the simplest durable write (a one-row INSERT, its own commit) costs this
 * Postgres in CPU at the same concurrency, so a run's cost reads as "k such commits" on any server.
 */
async function calibrate(o: OpenedRuntime, commits: number, inFlight: number) {
  const t = `"${o.db.schema}".cap_calibration`;
  await o.db.pool.query(`CREATE TABLE IF NOT EXISTS ${t} (id bigserial PRIMARY KEY, v text)`);
  const pg0 = postgresCpuSeconds();
  const t0 = now();
  let next = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next++ < commits) await o.db.pool.query(`INSERT INTO ${t} (v) VALUES ($1)`, ["x"]);
    }),
  );
  const seconds = (now() - t0) / 1000;
  const pgCpu = postgresCpuSeconds() - pg0;
  return {
    commits,
    inFlight,
    commitsPerSec: Math.round(commits / seconds),
    postgresCpuMsPerCommit: round((pgCpu * 1000) / commits, 3),
  };
}

/** What one Postgres server of `cores` cores sustains for a shape, and what bounds it first. */
function model(m: Measured, cores: number) {
  const { postgresCpuMs, workerCpuMs, walBytes } = m.perStep;
  const byCpu = (cores * UTIL * 1000) / postgresCpuMs; // steps/s
  const byWal = (WAL_MB_PER_SEC * 1e6) / walBytes;
  const stepsPerSec = Math.min(byCpu, byWal);
  return {
    postgresCores: cores,
    stepsPerSec: Math.round(stepsPerSec),
    runsPerSec: Math.round(stepsPerSec / m.stepsPerRun),
    workerCoresNeeded: round((stepsPerSec * workerCpuMs) / 1000, 1),
    statementsPerSec: Math.round(stepsPerSec * m.perStep.statements),
    walMBPerSec: round((stepsPerSec * walBytes) / 1e6, 1),
    notifiesPerSec: Math.round((stepsPerSec * m.perRun.notifies) / m.stepsPerRun),
    storedGBPerDay: round((stepsPerSec * m.perStep.storedBytes * 86_400) / 1e9, 0),
    firstLimit: byCpu <= byWal ? "postgres CPU" : "WAL bandwidth",
  };
}

export async function capacitySuite(opts: { quick: boolean; inFlight?: number }): Promise<void> {
  const url = process.env.DATABASE_URL || process.env.BENCH_SERVER_URL || "postgres://postgres@127.0.0.1:5432/test";
  const schema = `cap_${randomUUID().replace(/-/g, "").slice(0, 10)}`;
  const inFlight = opts.inFlight ?? Number(process.env.BENCH_CAPACITY_IN_FLIGHT ?? 20);
  const o = await openRuntime({ databaseUrl: url, dataDir: ":memory:", schema, poolSize: 10 });
  try {
    if (!o.runtime.registry.has(gate.name)) o.runtime.registry.register(gate);
    const cal = await calibrate(o, opts.quick ? 2_000 : 10_000, inFlight);
    emitLine({ suite: "capacity-calibration", backend: "postgres-server", machineCores: cpus().length, ...cal });
    log(
      `capacity calibration: a one-row INSERT commit costs ${cal.postgresCpuMsPerCommit} ms Postgres CPU (${cal.commitsPerSec}/s)`,
    );
    for (const s of SHAPES) {
      const runs = Math.max(20, Math.round((opts.quick ? 100 : 1_000) / s.steps));
      const m = await measureShape(o, s, runs, inFlight);
      emitLine({
        suite: "capacity",
        backend: "postgres-server",
        machineCores: cpus().length,
        ...m,
        postgresCpuInCommits: {
          perRun: round(m.perRun.postgresCpuMs / cal.postgresCpuMsPerCommit, 1),
          perStep: round(m.perStep.postgresCpuMs / cal.postgresCpuMsPerCommit, 1),
        },
        assumptions: { utilisation: UTIL, walMBPerSec: WAL_MB_PER_SEC },
        model: [16, 96].map((c) => model(m, c)),
      });
      log(
        `capacity ${s.name}: ${m.perStep.statements} statements, ${m.perStep.walBytes} WAL bytes, ` +
          `${m.perStep.postgresCpuMs} ms Postgres CPU and ${m.perStep.workerCpuMs} ms worker CPU per step; ` +
          `${m.stepsPerSec} steps/s here (${m.coresBusy} cores busy)`,
      );
    }
  } finally {
    await o.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
    await o.close();
  }
}

if (isMain("capacity")) {
  await capacitySuite({ quick: process.env.BENCH_QUICK === "1" });
  process.exit(0);
}
