/**
 * Scheduling suite: makespan of random layered DAGs of core.wait steps against the lower bound
 * max(critical path, total work / concurrency), for
 *   (a) this runtime (createRuntime(), default MemorySaver),
 *   (b) a baseline StateGraph that fans ready steps out with Send to one executor node
 *       (superstep semantics; a router node picks at most maxConcurrency ready steps, highest
 *       critical-path rank first, i.e. the same priority the runtime uses), MemorySaver,
 *   (c) declaration-order sequential execution (plain awaited waits).
 * Sequential execution does not depend on maxConcurrency, so it is measured once per DAG and the
 * same measurement is printed on each of that DAG's lines.
 */
import { Annotation, END, MemorySaver, Send, START, StateGraph, task } from "@langchain/langgraph";
import { createRuntime } from "../src/index.js";
import { lowerBoundMs, randomDag, randomWindowDag, toPlan, type Dag } from "./dag.js";
import { emitLine, inPhase, log, maybeGc, median, now, round, sleep } from "./timing.js";

export interface SchedulingOptions {
  sizes: number[];
  concurrencies: (number | undefined)[];
  seed: number;
  /** repetitions (runtime and Send baseline interleaved) per (size, concurrency); medians are printed */
  repsFor: (steps: number) => number;
}

export function runRuntime(dag: Dag, maxConcurrency: number | undefined): Promise<number> {
  return inPhase("runtime", () => runRuntimeIn(dag, maxConcurrency));
}
async function runRuntimeIn(dag: Dag, maxConcurrency: number | undefined): Promise<number> {
  const rt = createRuntime();
  const plan = toPlan(dag, maxConcurrency);
  const t0 = now();
  const view = await rt.run(plan).result;
  const ms = now() - t0;
  const bad = view.steps.filter((s) => s.status !== "completed");
  if (view.status !== "completed" || bad.length)
    throw new Error(`runtime run ended ${view.status} (${bad.length} steps not completed)`);
  return ms;
}

const SendState = Annotation.Root({
  done: Annotation<number[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});
type SendStateT = typeof SendState.State;

export function buildSendBaseline(dag: Dag, maxConcurrency: number | undefined) {
  const n = dag.steps.length;
  const limit = maxConcurrency ?? Number.POSITIVE_INFINITY;
  const order = dag.steps.map((_, i) => i).sort((a, b) => dag.rank[b]! - dag.rank[a]! || a - b);
  let supersteps = 0;
  const route = (s: SendStateT): Send[] | typeof END => {
    supersteps++;
    if (s.done.length >= n) return END;
    const done = new Uint8Array(n);
    for (const i of s.done) done[i] = 1;
    const out: Send[] = [];
    for (const i of order) {
      if (out.length >= limit) break;
      if (done[i]) continue;
      if (dag.steps[i]!.deps.every((d) => done[d])) out.push(new Send("executor", { i }));
    }
    if (out.length === 0) throw new Error("send baseline: nothing ready but not done");
    return out;
  };
  const executor = async (arg: { i: number }) => {
    await sleep(dag.steps[arg.i]!.ms);
    return { done: [arg.i] };
  };
  const graph = new StateGraph(SendState)
    .addNode("router", () => ({}))
    .addNode("executor", executor as unknown as (s: SendStateT) => Promise<Partial<SendStateT>>)
    .addEdge(START, "router")
    .addConditionalEdges("router", route, ["executor", END])
    .addEdge("executor", "router")
    .compile({ checkpointer: new MemorySaver() });
  return { graph, supersteps: () => supersteps };
}

export function runSendBaseline(
  dag: Dag,
  maxConcurrency: number | undefined,
): Promise<{ ms: number; supersteps: number }> {
  return inPhase("LangGraph Send baseline", () => runSendBaselineIn(dag, maxConcurrency));
}
async function runSendBaselineIn(
  dag: Dag,
  maxConcurrency: number | undefined,
): Promise<{ ms: number; supersteps: number }> {
  const { graph, supersteps } = buildSendBaseline(dag, maxConcurrency);
  const t0 = now();
  const out = await graph.invoke({}, { configurable: { thread_id: "bench" }, recursionLimit: 1_000_000 });
  const ms = now() - t0;
  if (out.done.length !== dag.steps.length)
    throw new Error(`send baseline finished ${out.done.length}/${dag.steps.length} steps`);
  // routing rounds = executor supersteps (+1 for the final router call that ends the graph)
  return { ms, supersteps: supersteps() - 1 };
}

/** The floor for any scheduler: each step starts when the promises of its dependencies resolve. */
export async function runReadyQueue(dag: Dag): Promise<number> {
  const t0 = now();
  const done: Promise<void>[] = [];
  for (const s of dag.steps)
    done.push((s.deps.length ? Promise.all(s.deps.map((d) => done[d]!)) : Promise.resolve()).then(() => sleep(s.ms)));
  await Promise.all(done);
  return now() - t0;
}

/**
 * LangGraph's own floor for this runtime's design: one node that starts each step as a `task()`
 * as soon as its dependencies' tasks resolve (the same ready queue, through LangGraph's task path
 * and a MemorySaver), with none of the runtime's work around each step.
 */
export function runBareTaskQueue(dag: Dag): Promise<number> {
  return inPhase("bare task() ready queue", async () => {
    const wait = task("wait", async (i: number) => {
      await sleep(dag.steps[i]!.ms);
      return i;
    });
    const graph = new StateGraph(Annotation.Root({ x: Annotation<number>() }))
      .addNode("run", async () => {
        const done: Promise<number>[] = [];
        for (const [i, s] of dag.steps.entries())
          done.push(
            (s.deps.length ? Promise.all(s.deps.map((d) => done[d]!)) : Promise.resolve()).then(
              async () => await wait(i),
            ),
          );
        await Promise.all(done);
        return { x: 1 };
      })
      .addEdge(START, "run")
      .addEdge("run", END)
      .compile({ checkpointer: new MemorySaver() });
    const t0 = now();
    await graph.invoke({ x: 0 }, { configurable: { thread_id: "bench" }, recursionLimit: 1_000_000 });
    return now() - t0;
  });
}

/** Per-wave Promise.all: run every ready step, wait for all of them, repeat (no engine, same waves as Send). */
export async function runWaves(dag: Dag): Promise<number> {
  const t0 = now();
  const done = new Uint8Array(dag.steps.length);
  let left = dag.steps.length;
  while (left > 0) {
    const wave = dag.steps.map((s, i) => i).filter((i) => !done[i] && dag.steps[i]!.deps.every((d) => done[d]));
    await Promise.all(wave.map((i) => sleep(dag.steps[i]!.ms)));
    for (const i of wave) done[i] = 1;
    left -= wave.length;
  }
  return now() - t0;
}

/**
 * Random non-layered DAGs (each step depends on some of the 10 before it, 5–50 ms, unlimited
 * concurrency): makespan / critical path for the runtime, a raw promise ready queue, the same
 * ready queue of bare LangGraph `task()`s, LangGraph Send per step and per-wave Promise.all,
 * interleaved per repetition; medians.
 */
export async function windowSuite(opts: { sizes: number[]; seed: number; reps: number }): Promise<void> {
  // warm-up (the suite may run alone): load and JIT every variant's path on a small DAG
  const warm = randomWindowDag(20, opts.seed + 999, { minMs: 1, maxMs: 5 });
  await runRuntime(warm, undefined);
  await runBareTaskQueue(warm);
  await runSendBaseline(warm, undefined);
  for (const n of opts.sizes) {
    const dag = randomWindowDag(n, opts.seed + n);
    const cp = dag.criticalPathMs;
    log(
      `scheduling (non-layered): ${n} steps, depth ${dag.layers}, critical path ${cp} ms, work ${dag.totalWorkMs} ms`,
    );
    const s = {
      runtime: [] as number[],
      readyQueue: [] as number[],
      bareTask: [] as number[],
      send: [] as number[],
      waves: [] as number[],
    };
    let supersteps = 0;
    for (let r = 0; r < opts.reps; r++) {
      maybeGc();
      s.runtime.push(await runRuntime(dag, undefined));
      maybeGc();
      s.readyQueue.push(await runReadyQueue(dag));
      maybeGc();
      s.bareTask.push(await runBareTaskQueue(dag));
      maybeGc();
      const send = await runSendBaseline(dag, undefined);
      s.send.push(send.ms);
      supersteps = send.supersteps;
      maybeGc();
      s.waves.push(await runWaves(dag));
      log(
        `  rep ${r + 1}/${opts.reps}: runtime ${round(s.runtime.at(-1)! / cp, 3)}, ready queue ${round(s.readyQueue.at(-1)! / cp, 3)}, bare task() ${round(s.bareTask.at(-1)! / cp, 3)}, send ${round(send.ms / cp, 3)}, waves ${round(s.waves.at(-1)! / cp, 3)} (x critical path ${cp} ms)`,
      );
    }
    emitLine({
      suite: "scheduling",
      shape: "non-layered",
      steps: n,
      maxConcurrency: "unlimited",
      reps: opts.reps,
      runtime: cellOf(s.runtime, cp),
      readyQueue: cellOf(s.readyQueue, cp),
      bareTaskQueue: cellOf(s.bareTask, cp),
      sendBaseline: { ...cellOf(s.send, cp), supersteps },
      waves: cellOf(s.waves, cp),
      runtimeOverReadyQueue: round(median(s.runtime) / median(s.readyQueue), 3),
      runtimeOverBareTaskQueue: round(median(s.runtime) / median(s.bareTask), 3),
      criticalPathMs: cp,
      totalWorkMs: dag.totalWorkMs,
      depth: dag.layers,
    });
  }
}

export async function runSequential(dag: Dag): Promise<number> {
  const t0 = now();
  for (const s of dag.steps) await sleep(s.ms);
  return now() - t0;
}

const cell = (ms: number, lb: number) => ({ makespanMs: round(ms, 1), ratio: round(ms / lb, 3) });
const cellOf = (samples: number[], lb: number) => ({
  ...cell(median(samples), lb),
  ...(samples.length > 1 ? { samplesMs: samples.map((x) => round(x, 1)) } : {}),
});

export async function schedulingSuite(opts: SchedulingOptions): Promise<void> {
  // warm-up: load and JIT both graph paths on a small DAG
  const warm = randomDag(20, opts.seed + 999, { minMs: 1, maxMs: 5 });
  await runRuntime(warm, 4);
  await runSendBaseline(warm, 4);

  for (const n of opts.sizes) {
    const dag = randomDag(n, opts.seed + n);
    log(
      `scheduling: ${n} steps, ${dag.layers} layers, critical path ${dag.criticalPathMs} ms, work ${dag.totalWorkMs} ms`,
    );
    maybeGc();
    const seqMs = await runSequential(dag);
    log(`  sequential ${round(seqMs, 0)} ms`);
    for (const c of opts.concurrencies) {
      const lb = lowerBoundMs(dag, c);
      const reps = opts.repsFor(n);
      const rt: number[] = [];
      const send: number[] = [];
      let supersteps = 0;
      for (let r = 0; r < reps; r++) {
        maybeGc();
        rt.push(await runRuntime(dag, c));
        maybeGc();
        const s = await runSendBaseline(dag, c);
        send.push(s.ms);
        supersteps = s.supersteps;
        log(
          `  c=${c ?? "unlimited"} rep ${r + 1}/${reps}: runtime ${round(rt.at(-1)!, 0)} ms, send baseline ${round(s.ms, 0)} ms (${s.supersteps} supersteps), lb ${round(lb, 0)} ms`,
        );
      }
      emitLine({
        suite: "scheduling",
        steps: n,
        maxConcurrency: c ?? "unlimited",
        reps,
        runtime: cellOf(rt, lb),
        sendBaseline: { ...cellOf(send, lb), supersteps },
        sequential: { ...cell(seqMs, lb), measuredOncePerDag: true },
        lowerBoundMs: round(lb, 1),
        criticalPathMs: dag.criticalPathMs,
        totalWorkMs: dag.totalWorkMs,
        layers: dag.layers,
      });
    }
  }
}
