/**
 * Durable suite: the cost per step of the durable runtime (checkpoint + step-run rows + events)
 * on embedded and server Postgres, beside a bare LangGraph task() per step on the same
 * saver (and on LangGraph's stock PostgresSaver over the same tables), measured in the same run; resume latency (confirm call -> next step's start);
 * checkpoint bytes per step as runs grow; a trivial one-step run beside a bare one-node graph;
 * a 10,000-step chain's per-step cost beside the 1,000-step chain's (BENCH_DURABLE_BIG sets the
 * size, 0 skips it; BENCH_DURABLE_ONLY=ratios skips resume latency and checkpoint bytes).
 * Beside the times, per run of each variant: database round trips (statements on the pool while
 * it ran, counted at the database layer's one seam, src/store/commit-points.ts) and supersteps
 * (its thread's checkpoints, bench/timing.ts `superstepsOf`): deterministic, unlike the times.
 */
import { randomUUID } from "node:crypto";
import { Annotation, END, START, StateGraph, task } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import pg from "pg";
import { z } from "zod";
import { defineSkill } from "../src/skills/contract.js";
import { openRuntime, type OpenedRuntime } from "../src/runtime/open.js";
import { countStatements } from "../src/store/commit-points.js";
import { emitLine, inPhase, log, median, now, round, superstepsOf, isMain } from "./timing.js";

import { noopPlan, type Shape } from "./overhead.js";

const plan = noopPlan;

/** Bare LangGraph: one node awaiting one task() per step, on the runtime's own PostgresSaver. */
export function bareGraph(saver: PostgresSaver) {
  const S = Annotation.Root({ n: Annotation<number>, shape: Annotation<Shape> });
  return new StateGraph(S)
    .addNode("work", async (s: typeof S.State) => {
      const t = (i: number) => task({ name: `t${i}` }, async () => null)();
      if (s.shape === "chain") for (let i = 0; i < s.n; i++) await t(i);
      else await Promise.all(Array.from({ length: s.n }, (_, i) => t(i)));
      return {};
    })
    .addEdge(START, "work")
    .addEdge("work", END)
    .compile({ checkpointer: saver });
}

/**
 * LangGraph's PostgresSaver as shipped, on the runtime's pool and tables: the runtime's saver
 * (src/store/saver.ts) batches its writes, which speeds up the bare baseline as much as the
 * runtime, so the bench also prints bare task() on the stock saver (what a LangGraph user runs).
 */
function stockSaver(o: OpenedRuntime): PostgresSaver {
  return new PostgresSaver(o.db.pool, undefined, { schema: o.db.schema });
}

/** What one run of a variant cost: its time, and (deterministic) round trips and supersteps. */
interface Sample {
  ms: number;
  roundTrips: number;
  supersteps: number;
}

/** Times one run (`fn` returns its thread id) and counts its round trips and supersteps. */
async function measure(o: OpenedRuntime, saver: PostgresSaver, fn: () => Promise<string>): Promise<Sample> {
  const count = countStatements(o.db.pool);
  const t0 = now();
  let thread: string;
  try {
    thread = await fn();
  } finally {
    count.stop();
  }
  const ms = now() - t0;
  return { ms, roundTrips: count.roundTrips, supersteps: await superstepsOf(saver, thread) };
}

/** The three variants (one run each, returning its thread) and the saver each checkpoints to. */
function variants(o: OpenedRuntime, n: number, shape: Shape) {
  const stock = stockSaver(o);
  const bareRun = (saver: PostgresSaver, durability?: "sync") => {
    const g = bareGraph(saver);
    return {
      saver,
      run: async () => {
        const thread = randomUUID();
        await g.invoke({ n, shape }, { configurable: { thread_id: thread }, ...(durability ? { durability } : {}) });
        return thread;
      },
    };
  };
  return {
    runtime: {
      saver: o.saver,
      run: async () => {
        const v = await o.runtime.run(plan(n, shape)).result;
        if (v.status !== "completed") throw new Error(v.status);
        return v.runId;
      },
    },
    bare: bareRun(o.saver),
    // the durability the runtime runs with (a superstep's checkpoint saved before the next starts:
    // src/runtime/driver.ts): what the same guarantee costs bare LangGraph
    bareSync: bareRun(o.saver, "sync"),
    stock: bareRun(stock),
  };
}

type VariantName = keyof ReturnType<typeof variants>;
const NAMES: VariantName[] = ["runtime", "bare", "bareSync", "stock"];

/** Interleaved runs of every variant, rotating which goes first. */
async function interleaved(o: OpenedRuntime, n: number, shape: Shape, reps: number, phases = false) {
  const v = variants(o, n, shape);
  const out: Record<VariantName, Sample[]> = { runtime: [], bare: [], bareSync: [], stock: [] };
  for (let r = 0; r < reps; r++)
    for (let k = 0; k < NAMES.length; k++) {
      const name = NAMES[(r + k) % NAMES.length]!;
      const run = () => measure(o, v[name].saver, v[name].run);
      const phase = name === "runtime" ? "runtime" : "bare task() baseline";
      out[name].push(phases ? await inPhase(phase, run) : await run());
    }
  return out;
}

/** Median round trips and supersteps per run of each variant, beside the times. */
function counts(s: Record<VariantName, Sample[]>) {
  const med = (xs: Sample[], k: "roundTrips" | "supersteps") => median(xs.map((x) => x[k]));
  return {
    roundTripsPerRun: {
      runtime: med(s.runtime, "roundTrips"),
      bare: med(s.bare, "roundTrips"),
      bareSync: med(s.bareSync, "roundTrips"),
      bareStockSaver: med(s.stock, "roundTrips"),
    },
    superstepsPerRun: {
      runtime: med(s.runtime, "supersteps"),
      bare: med(s.bare, "supersteps"),
      bareSync: med(s.bareSync, "supersteps"),
      bareStockSaver: med(s.stock, "supersteps"),
    },
  };
}

async function perStep(o: OpenedRuntime, n: number, shape: Shape, reps: number) {
  const s = await interleaved(o, n, shape, reps, true);
  const per = (xs: Sample[]) => median(xs.map((x) => x.ms / n));
  return {
    runtimeMsPerStep: round(per(s.runtime)),
    bareTaskMsPerStep: round(per(s.bare)),
    ratio: round(per(s.runtime) / per(s.bare), 2),
    bareSyncMsPerStep: round(per(s.bareSync)),
    ratioToBareSync: round(per(s.runtime) / per(s.bareSync), 2),
    bareTaskStockSaverMsPerStep: round(per(s.stock)),
    ratioToStockSaver: round(per(s.runtime) / per(s.stock), 2),
    ...counts(s),
  };
}

/**
 * A trivial run (one no-op step) against a bare one-node graph running one task() on the same
 * saver: interleaved, rotating which goes first; p50 of each and their ratio.
 */
async function trivialRuns(o: OpenedRuntime, count: number) {
  const s = await interleaved(o, 1, "chain", count);
  const ms = (xs: Sample[]) => xs.map((x) => x.ms);
  const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)]!;
  return {
    n: count,
    runtimeP50Ms: round(median(ms(s.runtime)), 2),
    bareP50Ms: round(median(ms(s.bare)), 2),
    ratio: round(median(ms(s.runtime)) / median(ms(s.bare)), 2),
    bareSyncP50Ms: round(median(ms(s.bareSync)), 2),
    ratioToBareSync: round(median(ms(s.runtime)) / median(ms(s.bareSync)), 2),
    bareStockSaverP50Ms: round(median(ms(s.stock)), 2),
    ratioToStockSaver: round(median(ms(s.runtime)) / median(ms(s.stock)), 2),
    runtimeP90Ms: round(p90(ms(s.runtime)), 2),
    bareP90Ms: round(p90(ms(s.bare)), 2),
    ...counts(s),
  };
}

/** Per-step cost of one big chain beside the 1,000-step chain's, measured right after it on the same database. */
async function bigChain(o: OpenedRuntime, big: number, base: number, reps: number) {
  const per = async (n: number) => {
    const t0 = now();
    const v = await o.runtime.run(plan(n, "chain")).result;
    if (v.status !== "completed") throw new Error(v.status);
    return (now() - t0) / n;
  };
  const small: number[] = [];
  const large: number[] = [];
  for (let r = 0; r < reps; r++) {
    small.push(await per(base));
    large.push(await per(big));
    small.push(await per(base));
    log(
      `durable big chain rep ${r + 1}/${reps}: ${big} steps ${round(large.at(-1)!, 3)} ms/step, ${base} steps ${round(small.at(-2)!, 3)} / ${round(small.at(-1)!, 3)} ms/step`,
    );
  }
  return {
    steps: big,
    baseSteps: base,
    runtimeMsPerStep: round(median(large), 3),
    baseRuntimeMsPerStep: round(median(small), 3),
    perStepGrowth: round(median(large) / median(small), 2),
  };
}

async function resumeLatency(o: OpenedRuntime, count: number) {
  let started = 0;
  const gate = defineSkill({
    name: "bench.approve_me",
    description: "needs approval; records when it starts",
    input: z.object({}),
    sideEffects: "none",
    idempotent: true,
    requiresConfirmation: true,
    async execute() {
      started = now();
      return null;
    },
  });
  if (!o.runtime.registry.has(gate.name)) o.runtime.registry.register(gate);
  const lat: number[] = [];
  for (let i = 0; i < count; i++) {
    const v = await o.runtime.run({ steps: [{ stepId: "a", skillName: "bench.approve_me" }] }).result;
    if (v.status !== "waiting_confirmation") throw new Error(v.status);
    started = 0;
    const t0 = now();
    const h = await o.runtime.confirm(v.runId, { stepId: "a", decision: "approve" });
    const done = await h.result;
    if (done.status !== "completed" || !started) throw new Error(done.status);
    lat.push(started - t0);
  }
  const s = [...lat].sort((a, b) => a - b);
  return {
    p50Ms: round(median(lat), 2),
    p99Ms: round(s[Math.min(s.length - 1, Math.floor(s.length * 0.99))]!, 2),
    n: count,
  };
}

async function checkpointBytes(o: OpenedRuntime, sizes: number[]) {
  const out: { steps: number; bytes: number; bytesPerStep: number }[] = [];
  const q = (sql: string, p: unknown[]) => o.db.pool.query(sql, p);
  for (const n of sizes) {
    const v = await o.runtime.run(plan(n, "chain")).result;
    const s = `"${o.db.schema}"`;
    const { rows } = await q(
      `SELECT (SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM ${s}.checkpoints c WHERE thread_id = $1)
            + (SELECT coalesce(sum(pg_column_size(b.*)), 0) FROM ${s}.checkpoint_blobs b WHERE thread_id = $1)
            + (SELECT coalesce(sum(pg_column_size(w.*)), 0) FROM ${s}.checkpoint_writes w WHERE thread_id = $1) AS bytes`,
      [v.runId],
    );
    const bytes = Number(rows[0].bytes);
    out.push({ steps: n, bytes, bytesPerStep: round(bytes / n, 1) });
  }
  return out;
}

export async function durableSuite(opts: { quick: boolean }) {
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
  for (const b of backends) {
    const schema = `bench_${randomUUID().replace(/-/g, "").slice(0, 10)}`;
    const o = await openRuntime({ databaseUrl: b.url, dataDir: ":memory:", schema, poolSize: 10 });
    try {
      log(`durable: ${b.name}`);
      await o.runtime.run(plan(20, "chain")).result; // warm-up
      for (const [shape, n] of [
        ["chain", opts.quick ? 200 : 1_000],
        ["fanout", 200],
      ] as [Shape, number][]) {
        const r = await perStep(o, n, shape, opts.quick ? 1 : 3);
        emitLine({ suite: "durable", db: b.name, shape, steps: n, ...r, target: "ratio <= 1.5" });
      }
      emitLine({
        suite: "durable-trivial",
        db: b.name,
        ...(await trivialRuns(o, opts.quick ? 20 : 60)),
        target: "ratio <= 2",
      });
      if (process.env.BENCH_DURABLE_BIG !== "0") {
        const big = Number(process.env.BENCH_DURABLE_BIG ?? (opts.quick ? 2_000 : 10_000));
        emitLine({
          suite: "durable-scaling",
          db: b.name,
          shape: "chain",
          ...(await bigChain(o, big, opts.quick ? 200 : 1_000, 1)),
          target: "perStepGrowth <= 1.2",
        });
      }
      if (process.env.BENCH_DURABLE_ONLY === "ratios") continue;
      emitLine({
        suite: "durable-resume",
        db: b.name,
        ...(await resumeLatency(o, opts.quick ? 20 : 100)),
        target: b.name === "server" ? "p50 <= 20 ms" : undefined,
      });
      const bytes = await checkpointBytes(o, opts.quick ? [50, 100, 200] : [100, 300, 1_000]);
      emitLine({
        suite: "durable-checkpoint-bytes",
        db: b.name,
        runs: bytes,
        growth: round(bytes.at(-1)!.bytesPerStep / bytes[0]!.bytesPerStep, 2),
        note: "bytes per step should stay flat (linear total)",
      });
    } finally {
      if (b.url) await o.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
      await o.close();
    }
  }
}

if (isMain("durable")) {
  await durableSuite({ quick: process.env.BENCH_QUICK === "1" });
  process.exit(0);
}
