/**
 * Overhead suite: no-op steps (core.pass with value null), as a chain and as a fan-out of
 * independent steps, in ms per step, beside
 *   (i) bare LangGraph: one StateGraph node awaiting one functional-API task() per step
 *       (chain: one after another; fan-out: Promise.all), MemorySaver checkpointer,
 *   (ii) raw awaited promises.
 * Variants are interleaved within each repetition (order rotated) after a warm-up; medians.
 * Beside the times: the supersteps one run of each takes (from its checkpoints; deterministic).
 */
import { createHook } from "node:async_hooks";
import { Annotation, END, MemorySaver, START, StateGraph, task } from "@langchain/langgraph";
import { createRuntime } from "../src/index.js";
import { emitLine, inPhase, log, maybeGc, median, now, round, superstepsOf } from "./timing.js";
import { floorLine } from "./floor.js";

export type Shape = "chain" | "fanout";

export interface OverheadOptions {
  steps: number;
  reps: number;
  bigSteps: number;
  bigReps: number;
}

export function noopPlan(n: number, shape: Shape) {
  return {
    steps: Array.from({ length: n }, (_, i) => ({
      stepId: `s${i}`,
      skillName: "core.pass",
      dependsOn: shape === "chain" && i > 0 ? [`s${i - 1}`] : [],
      arguments: { value: null },
    })),
  };
}

/** Total ms for one runtime run (runtime construction excluded, validation included). */
export async function runtimeRun(n: number, shape: Shape): Promise<number> {
  const rt = createRuntime();
  const plan = noopPlan(n, shape);
  const t0 = now();
  const view = await rt.run(plan).result;
  const ms = now() - t0;
  if (view.status !== "completed") throw new Error(`runtime run ended ${view.status}`);
  return ms;
}

/** Supersteps of one runtime run and one bare-task run of this size and shape (untimed). */
export async function superstepsPerRun(n: number, shape: Shape): Promise<{ runtime: number; bareTask: number }> {
  const saver = new MemorySaver();
  const view = await inPhase("runtime", () => createRuntime({ checkpointer: saver }).run(noopPlan(n, shape)).result);
  const bare = buildBareTaskGraph(n, shape);
  await inPhase(PHASE.bareTask, () => bare.invoke({ count: 0 }, { configurable: { thread_id: "supersteps" } }));
  return {
    runtime: await superstepsOf(saver, view.runId),
    bareTask: await superstepsOf(bare.checkpointer as MemorySaver, "supersteps"),
  };
}

/**
 * Promises created per step by one runtime run and one bare-task run (untimed; deterministic up to
 * timer races). Under Node 20's AsyncLocalStorage every promise runs an init hook, so each one is
 * CPU on every step beside the allocation and its microtask.
 */
export async function promisesPerStep(n: number, shape: Shape): Promise<{ runtime: number; bareTask: number }> {
  let count = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === "PROMISE") count++;
    },
  });
  const counted = async (f: () => Promise<unknown>) => {
    count = 0;
    hook.enable();
    try {
      await f();
    } finally {
      hook.disable();
    }
    return round(count / n, 1);
  };
  return {
    runtime: await counted(() => inPhase("runtime", () => runtimeRun(n, shape))),
    bareTask: await counted(() => inPhase(PHASE.bareTask, () => bareTaskRun(n, shape))),
  };
}

const BareState = Annotation.Root({ count: Annotation<number>() });
const noopTask = task("noop", async (_i: number) => null);

export function buildBareTaskGraph(n: number, shape: Shape) {
  return new StateGraph(BareState)
    .addNode("run", async () => {
      if (shape === "chain") {
        for (let i = 0; i < n; i++) await noopTask(i);
      } else {
        await Promise.all(Array.from({ length: n }, (_, i) => noopTask(i)));
      }
      return { count: n };
    })
    .addEdge(START, "run")
    .addEdge("run", END)
    .compile({ checkpointer: new MemorySaver() });
}

/** Total ms for one bare-task run (graph compilation excluded). */
export async function bareTaskRun(n: number, shape: Shape): Promise<number> {
  const graph = buildBareTaskGraph(n, shape);
  const t0 = now();
  const out = await graph.invoke({ count: 0 }, { configurable: { thread_id: "bench" } });
  const ms = now() - t0;
  if (out.count !== n) throw new Error("bare task run incomplete");
  return ms;
}

const rawNoop = async (_i: number): Promise<null> => null;
export async function rawRun(n: number, shape: Shape): Promise<number> {
  const t0 = now();
  if (shape === "chain") {
    for (let i = 0; i < n; i++) await rawNoop(i);
  } else {
    await Promise.all(Array.from({ length: n }, (_, i) => rawNoop(i)));
  }
  return now() - t0;
}

type Variant = "runtime" | "bareTask" | "raw";
const RUN: Record<Variant, (n: number, shape: Shape) => Promise<number>> = {
  runtime: runtimeRun,
  bareTask: bareTaskRun,
  raw: rawRun,
};
const VARIANTS: Variant[] = ["runtime", "bareTask", "raw"];
// warnings (bench/run.ts counts MaxListenersExceededWarning per phase) are attributed to the variant that ran
const PHASE: Record<Variant, string> = { runtime: "runtime", bareTask: "bare task() baseline", raw: "raw promises" };

export async function overheadSuite(opts: OverheadOptions): Promise<void> {
  const shapes: Shape[] = ["chain", "fanout"];
  // warm-up: every variant and shape once, unrecorded
  for (const shape of shapes)
    for (const v of VARIANTS) await inPhase(PHASE[v], () => RUN[v](Math.min(opts.steps, 200), shape));

  const perStep1k: Record<Shape, number> = { chain: Number.NaN, fanout: Number.NaN };
  for (const shape of shapes) {
    const samples: Record<Variant, number[]> = { runtime: [], bareTask: [], raw: [] };
    for (let r = 0; r < opts.reps; r++) {
      for (let k = 0; k < VARIANTS.length; k++) {
        const v = VARIANTS[(r + k) % VARIANTS.length]!;
        maybeGc();
        samples[v].push((await inPhase(PHASE[v], () => RUN[v](opts.steps, shape))) / opts.steps);
      }
      log(
        `overhead ${shape} ${opts.steps} rep ${r + 1}/${opts.reps}: ${VARIANTS.map((v) => `${v} ${round(samples[v].at(-1)!, 4)}`).join(", ")} ms/step`,
      );
    }
    const med = (v: Variant) => median(samples[v]);
    perStep1k[shape] = med("runtime");
    emitLine({
      suite: "overhead",
      shape,
      steps: opts.steps,
      reps: opts.reps,
      msPerStep: { runtime: round(med("runtime"), 4), bareTask: round(med("bareTask"), 4), raw: round(med("raw"), 5) },
      ratioRuntimeToBareTask: round(med("runtime") / med("bareTask"), 3),
      superstepsPerRun: await superstepsPerRun(opts.steps, shape),
      promisesPerStep: await promisesPerStep(opts.steps, shape),
      samplesMsPerStep: Object.fromEntries(VARIANTS.map((v) => [v, samples[v].map((x) => round(x, 4))])),
    });
    const runs = { runtime: (n: number) => runtimeRun(n, shape), bareTask: (n: number) => bareTaskRun(n, shape) };
    await floorLine(shape, Math.min(opts.steps, 1_000), runs);
  }

  for (const shape of shapes) {
    const samples: number[] = [];
    for (let r = 0; r < opts.bigReps; r++) {
      maybeGc();
      samples.push((await inPhase("runtime", () => runtimeRun(opts.bigSteps, shape))) / opts.bigSteps);
      log(
        `overhead ${shape} ${opts.bigSteps} rep ${r + 1}/${opts.bigReps}: runtime ${round(samples.at(-1)!, 4)} ms/step`,
      );
    }
    emitLine({
      suite: "overhead-scaling",
      shape,
      steps: opts.bigSteps,
      reps: opts.bigReps,
      runtimeMsPerStep: round(median(samples), 4),
      baseSteps: opts.steps,
      baseRuntimeMsPerStep: round(perStep1k[shape], 4),
      perStepGrowth: round(median(samples) / perStep1k[shape], 3),
      samplesMsPerStep: samples.map((x) => round(x, 4)),
    });
  }
}
