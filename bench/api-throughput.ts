/**
 * Sustained throughput of 20-step chains (core.wait, 5 ms a step), `inFlight` at once:
 *   api.runs_vs_bare  the runtime through its HTTP API (POST /run, wait) beside bare LangGraph
 *                     running the same chains (one node, one task() per step) on the same
 *                     PostgresSaver at the same concurrency, in one process run: steps/s ratio;
 *                     and the same runs through rt.run() in that process (what a request adds).
 *   api.workers       server Postgres only: an API-only process (TOOLCHAIN_ROLE=api) in front of
 *                     1, then 2 `toolchain worker` child processes: steps/s and the 2 ÷ 1 ratio.
 *   api.workers_pinned the same with the API, its load generator and Postgres pinned to CPU 0 and
 *                     the workers to CPU 1 (taskset): one worker core's steps/s, and 2 ÷ 1 on it.
 * The bare baseline is measured before and after the runtime (median of both) so drift in the
 * machine's load shows up as their spread, printed beside the ratio.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { cpus as cpuList, loadavg } from "node:os";
import { Annotation, END, START, StateGraph, task } from "@langchain/langgraph";
import type { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import autocannon from "autocannon";
import { canPin, cpuSecondsOf, pin, postgresCpuSeconds, postgresPids } from "./procs.js";
import { emitLine, log, now, round, sleep } from "./timing.js";
import { bundleEntry } from "../scripts/bundle.js";

const cpuCount = () => cpuList().length;

export const STEPS = 20;
export const STEP_MS = 5;

/** A chain of `n` core.wait steps of `ms` each (after an optional head step), as the API takes it. */
export const chain = (n: number, ms: number, head?: { stepId: string; ms: number }) => ({
  steps: [
    ...(head ? [{ stepId: head.stepId, skillName: "core.wait", arguments: { ms: head.ms } }] : []),
    ...Array.from({ length: n }, (_, i) => ({
      stepId: `s${i}`,
      skillName: "core.wait",
      dependsOn: i ? [`s${i - 1}`] : head ? [head.stepId] : [],
      arguments: { ms, value: i },
    })),
  ],
});

/** The 20-step chain of these measurements. */
export const waitChain = () => chain(STEPS, STEP_MS);

/** The same chain in bare LangGraph: one node awaiting one task() per step (each waits STEP_MS). */
export function bareChainGraph(saver: PostgresSaver) {
  const S = Annotation.Root({ n: Annotation<number> });
  return new StateGraph(S)
    .addNode("work", async (s: typeof S.State) => {
      for (let i = 0; i < s.n; i++) await task({ name: `s${i}` }, async (v: number) => (await sleep(STEP_MS), v))(i);
      return {};
    })
    .addEdge(START, "work")
    .addEdge("work", END)
    .compile({ checkpointer: saver });
}

/** `count` calls of `one`, at most `inFlight` at a time (each caller starts the next as its call ends). */
export async function keepInFlight(one: () => Promise<unknown>, count: number, inFlight: number): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(inFlight, count) }, async () => {
      while (next < count) {
        next++;
        await one();
      }
    }),
  );
}

/** `runs` invocations of the bare graph, `inFlight` at a time; steps/s. */
export async function bareThroughput(
  saver: PostgresSaver,
  runs: number,
  inFlight: number,
): Promise<{ stepsPerSec: number; seconds: number }> {
  const graph = bareChainGraph(saver);
  const t0 = now();
  await keepInFlight(() => graph.invoke({ n: STEPS }, { configurable: { thread_id: randomUUID() } }), runs, inFlight);
  const seconds = (now() - t0) / 1_000;
  return { stepsPerSec: round((runs * STEPS) / seconds, 1), seconds: round(seconds, 1) };
}

/**
 * `runs` of the same chain through `rt.run()` in the API's own process, `inFlight` at a time: the
 * run without the request (HTTP, auth, JSON, the view it answers with), so the API's line splits
 * into what the runtime costs and what a request costs on top.
 */
export async function inProcessThroughput(
  run: () => Promise<string>,
  runs: number,
  inFlight: number,
): Promise<{ stepsPerSec: number; seconds: number; failed: number }> {
  let failed = 0;
  const t0 = now();
  await keepInFlight(
    async () => {
      if ((await run()) !== "completed") failed++;
    },
    runs,
    inFlight,
  );
  const seconds = (now() - t0) / 1_000;
  return { stepsPerSec: round((runs * STEPS) / seconds, 1), seconds: round(seconds, 1), failed };
}

/** `runs` POST /run (wait: true) of the chain through `url`, `inFlight` connections; steps/s. */
export async function apiThroughput(url: string, key: string, runs: number, inFlight: number) {
  const r = await autocannon({
    url: `${url}/api/tool-chains/run`,
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ plan: waitChain() }),
    connections: inFlight,
    amount: runs,
    timeout: 600,
    workers: 1,
  });
  const p = r.latency;
  return {
    stepsPerSec: round((r["2xx"] * STEPS) / r.duration, 1),
    runsPerSec: round(r["2xx"] / r.duration, 2),
    seconds: r.duration,
    completedRuns: r["2xx"],
    runLatencyMs: { p50: p.p50, p99: p.p99, max: p.max },
    failed: r.non2xx + r.errors + r.timeouts,
  };
}

/**
 * The runtime through the API beside bare LangGraph on the same saver, and beside itself called
 * in-process (the request's own cost): bare, in-process, API, bare.
 */
export async function runsVersusBare(
  o: { saver: PostgresSaver; drain: () => Promise<void>; run: () => Promise<string> },
  url: string,
  key: string,
  backend: string,
  runs: number,
  inFlight: number,
): Promise<void> {
  const bare1 = await bareThroughput(o.saver, runs, inFlight);
  const load0 = loadavg()[0]!;
  const inProcess = await inProcessThroughput(o.run, runs, inFlight);
  await o.drain();
  const ours = await apiThroughput(url, key, runs, inFlight);
  await o.drain();
  const bare2 = await bareThroughput(o.saver, runs, inFlight);
  const bare = (bare1.stepsPerSec + bare2.stepsPerSec) / 2;
  emitLine({
    suite: "api",
    name: "runs_vs_bare",
    backend,
    steps: STEPS,
    stepMs: STEP_MS,
    inFlight,
    runs,
    runtime: ours,
    bareStepsPerSec: [bare1.stepsPerSec, bare2.stepsPerSec],
    ratio: round(ours.stepsPerSec / bare, 2),
    target: 0.66,
    inProcess,
    inProcessRatio: round(inProcess.stepsPerSec / bare, 2),
    // the share of the in-process throughput a request costs (HTTP, auth, JSON, the answered view)
    requestShare: round(1 - ours.stepsPerSec / inProcess.stepsPerSec, 2),
    load1AtStart: round(load0, 2),
  });
  log(
    `api.runs_vs_bare: ${ours.stepsPerSec} steps/s through the API, ${inProcess.stepsPerSec} in-process, vs ${round(bare, 1)} bare (${round(ours.stepsPerSec / bare, 2)}×, in-process ${round(inProcess.stepsPerSec / bare, 2)}×)`,
  );
}

/** A `toolchain worker` process on the given schema; resolves once it polls. */
async function startWorker(env: Record<string, string>, cpus?: string): Promise<ChildProcess> {
  // as `npm run worker` starts it: from the bundle, plain node
  const argv = [process.execPath, "--liftoff-only", await bundleEntry("src/cli/main.ts"), "worker"];
  // taskset execs node in place: the child's pid is the worker's
  const [cmd, ...args] = cpus ? ["taskset", "-c", cpus, ...argv] : argv;
  const proc = spawn(cmd!, args, {
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  return new Promise<ChildProcess>((resolve, reject) => {
    let err = "";
    proc.stderr!.on("data", (d: Buffer) => {
      err += d.toString();
      if (err.includes("polling for runs")) resolve(proc);
    });
    proc.once("exit", (code) => reject(new Error(`worker exited (${code}): ${err.slice(-500)}`)));
  });
}

async function stopWorker(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null) return;
  const gone = new Promise((r) => p.once("exit", r));
  p.kill("SIGTERM");
  await Promise.race([gone, sleep(10_000).then(() => p.kill("SIGKILL"))]);
}

/**
 * Server Postgres: the API (this process, queue mode) in front of 1 then 2 worker processes,
 * the same load each time. Each worker may hold every run in flight (TOOLCHAIN_WORKER_MAX_ACTIVE).
 */
export async function workersRatio(
  apiUrl: string,
  key: string,
  env: { DATABASE_URL: string; TOOLCHAIN_SCHEMA: string },
  runs: number,
  inFlight: number,
): Promise<void> {
  const workerEnv = {
    ...env,
    TOOLCHAIN_WORKER_POLL_MS: "20",
    TOOLCHAIN_WORKER_MAX_ACTIVE: String(inFlight),
    REDIS_URL: "",
  };
  /** `n` workers (on `cpus` when given) under the load: steps/s and the CPU each worker used. */
  const measure = async (n: number, cpus?: string) => {
    const workers = await Promise.all(Array.from({ length: n }, () => startWorker(workerEnv, cpus)));
    try {
      const cpu0 = workers.map((w) => cpuSecondsOf(w.pid!));
      const pg0 = postgresCpuSeconds();
      const r = await apiThroughput(apiUrl, key, runs, inFlight);
      const workerCores = workers.map((w, i) => round((cpuSecondsOf(w.pid!) - cpu0[i]!) / r.seconds, 2));
      return { ...r, workerCores, postgresCores: round((postgresCpuSeconds() - pg0) / r.seconds, 2) };
    } finally {
      await Promise.all(workers.map(stopWorker));
    }
  };
  const results: Record<number, Awaited<ReturnType<typeof measure>>> = {};
  for (const n of [1, 2]) {
    results[n] = await measure(n);
    log(`api.workers: ${n} worker(s): ${results[n]!.stepsPerSec} steps/s`);
  }
  emitLine({
    suite: "api",
    name: "workers",
    backend: "postgres-server",
    steps: STEPS,
    stepMs: STEP_MS,
    inFlight,
    runs,
    oneWorker: results[1],
    twoWorkers: results[2],
    ratio: round(results[2]!.stepsPerSec / results[1]!.stepsPerSec, 2),
  });
  // The same with the load generator (this process: the API and autocannon) and Postgres pinned to
  // CPU 0 and the workers to CPU 1 (taskset): what one worker core sustains, and whether a second
  // worker process on that core adds anything (≈ 1: the worker is CPU-bound; scale by cores).
  if (!canPin() || cpuCount() < 2) return log("api.workers_pinned: skipped (taskset unavailable or one CPU)");
  const all = `0-${cpuCount() - 1}`;
  const pinned: Record<number, Awaited<ReturnType<typeof measure>>> = {};
  try {
    pin(process.pid, "0");
    for (const p of postgresPids()) pin(p, "0");
    for (const n of [1, 2]) {
      pinned[n] = await measure(n, "1");
      log(`api.workers_pinned: ${n} worker(s) on CPU 1: ${pinned[n]!.stepsPerSec} steps/s`);
    }
  } finally {
    pin(process.pid, all);
    for (const p of postgresPids()) pin(p, all);
  }
  emitLine({
    suite: "api",
    name: "workers_pinned",
    backend: "postgres-server",
    placement: "API + load generator + Postgres on CPU 0, worker process(es) on CPU 1",
    steps: STEPS,
    stepMs: STEP_MS,
    inFlight,
    runs,
    oneWorker: pinned[1],
    twoWorkersOneCore: pinned[2],
    ratio: round(pinned[2]!.stepsPerSec / pinned[1]!.stepsPerSec, 2),
  });
}
