/**
 * What LangGraph's own task path costs per step before any of this runtime's work: `@langchain/core`
 * builds a langsmith `RunTree` for every runnable call it wraps in its async-local config
 * (`AsyncLocalStorageProvider.runWithConfig`, tracing on or off: with tracing off it is a
 * `tracingEnabled: false` carrier for the config). Counted per step for the runtime's chain and
 * bare `task()`s (calls that build one: no tracer, `avoidCreatingRootRunTree` unset), and timed alone.
 * The upstream change proposed: carry the config in a plain object when no tracer is configured
 * (README, "Where each target stands").
 */
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
import { RunTree } from "langsmith";
import { emitLine, median, now, round } from "./timing.js";

type RunWithConfig = typeof AsyncLocalStorageProviderSingleton.runWithConfig;
/** An n-step run of one kind (bench/overhead.ts), resolving when it ended. */
type RunOf = (n: number) => Promise<unknown>;

/** RunTrees built per step of an n-step run of each kind. */
async function runTreesPerStep(
  n: number,
  runtimeRun: RunOf,
  bareTaskRun: RunOf,
): Promise<{ runtime: number; bareTask: number }> {
  const singleton = AsyncLocalStorageProviderSingleton as { runWithConfig: RunWithConfig };
  const original = singleton.runWithConfig;
  let built = 0;
  singleton.runWithConfig = function (this: unknown, config, callback, avoidRoot) {
    if (!avoidRoot) built++;
    return original.call(this, config, callback, avoidRoot);
  } as RunWithConfig;
  try {
    built = 0;
    await runtimeRun(n);
    const runtime = built / n;
    built = 0;
    await bareTaskRun(n);
    return { runtime: round(runtime, 3), bareTask: round(built / n, 3) };
  } finally {
    singleton.runWithConfig = original;
  }
}

/** Microseconds to build one disabled RunTree (as runWithConfig does), median of 5 × 5,000. */
function runTreeMicros(): number {
  const samples: number[] = [];
  for (let r = 0; r < 5; r++) {
    const t0 = now();
    for (let i = 0; i < 5_000; i++) new RunTree({ name: "<runnable_lambda>", tracingEnabled: false });
    samples.push(((now() - t0) / 5_000) * 1000);
  }
  return median(samples);
}

/** One JSON line: RunTrees built per step, and one construction's cost alone. */
export async function floorLine(shape: string, n: number, runs: { runtime: RunOf; bareTask: RunOf }): Promise<void> {
  const perStep = await runTreesPerStep(n, runs.runtime, runs.bareTask);
  const us = runTreeMicros();
  emitLine({
    suite: "overhead-floor",
    measure: "langsmith RunTree built per runnable call (tracing off)",
    shape,
    steps: n,
    runTreesPerStep: perStep,
    usPerRunTreeAlone: round(us, 2),
  });
}
