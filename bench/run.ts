/**
 * `npm run bench`: every suite in one process, one JSON object per line on stdout (logs on stderr).
 * BENCH_QUICK=1 shrinks every size for a smoke test (well under a minute).
 * BENCH_SUITES=scheduling,dag,overhead,durable,qtable,validation,limits,api,capacity,tracing,profile,soak selects suites
 * (default: all but soak; `dag` is the non-layered part of scheduling alone). `npm run bench -- soak`
 * runs the soak alone.
 * BENCH_BIG_REPS=n repetitions of the 10,000-step runtime runs (default 2).
 * `profile` writes CPU profiles (.cpuprofile flame graphs) to BENCH_OUT (default .cache/bench).
 * Diagnostics outside the bench: bench/hop-latency.ts, bench/profile-overhead.ts.
 */
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { cpus, loadavg } from "node:os";
import { overheadSuite } from "./overhead.js";
import { schedulingSuite, windowSuite } from "./scheduling.js";
import { durableSuite } from "./durable.js";
import { qtableSuite } from "./qtable.js";
import { emitLine, log, now, phase, round } from "./timing.js";

// Every warning is printed; MaxListenersExceededWarning is also counted (it must stay 0: see
// graphs/durable-task.ts for the per-task signals that replaced one listener per task on a node's signal).
// LangGraph's own Send fan-out (the scheduling baseline) and the bare task() fan-out baselines still trip it: counted per phase.
// Counted where it is raised: Node emits the "warning" event on a later tick, by when a short
// baseline run may have ended and the next phase begun (its warnings were once counted as ours).
const maxListenerWarnings: Record<string, number> = {};
const emitWarning = process.emitWarning.bind(process) as (...args: unknown[]) => void;
process.emitWarning = ((warning: unknown, ...rest: unknown[]) => {
  const name = warning instanceof Error ? warning.name : typeof rest[0] === "string" ? rest[0] : undefined;
  if (name === "MaxListenersExceededWarning")
    maxListenerWarnings[phase.current] = (maxListenerWarnings[phase.current] ?? 0) + 1;
  emitWarning(warning, ...rest);
}) as typeof process.emitWarning;

const quick = process.env.BENCH_QUICK === "1";
// `npm run bench -- soak [runs]`: the soak alone
const soakOnly = process.argv[2] === "soak";
const suites = new Set(
  (soakOnly ? "soak" : (process.env.BENCH_SUITES ?? "scheduling,overhead,durable,qtable,limits"))
    .split(",")
    .map((s) => s.trim()),
);
const require = createRequire(import.meta.url);
const lgVersion = (require("@langchain/langgraph/package.json") as { version: string }).version;

emitLine({
  suite: "meta",
  quick,
  node: process.version,
  langgraph: lgVersion,
  gcExposed: typeof (globalThis as { gc?: unknown }).gc === "function",
  cpus: cpus().length,
  loadavg: loadavg().map((x) => round(x, 2)),
  startedAt: new Date().toISOString(),
});
const t0 = now();

if (suites.has("scheduling")) {
  await schedulingSuite({
    sizes: quick ? [50, 100] : [50, 200, 1_000],
    concurrencies: [4, 16, undefined],
    seed: 42,
    // small DAGs are cheap and noisy: median of 3; the 1,000-step DAG once (c=4 alone takes ~35 s)
    repsFor: (n) => (quick ? 1 : n <= 200 ? 3 : 1),
  });
}
if (suites.has("scheduling") || suites.has("dag")) {
  await windowSuite({ sizes: quick ? [50, 200] : [50, 200, 1_000], seed: 7, reps: quick ? 1 : 3 });
}
if (suites.has("overhead")) {
  // 10k-step runs take ~1-2 min each here (LangGraph's per-task cost grows with the number of
  // tasks in one superstep), so 2 repetitions keep the whole bench near 10 minutes.
  const bigReps = Number(process.env.BENCH_BIG_REPS ?? 2);
  await overheadSuite(
    quick ? { steps: 200, reps: 3, bigSteps: 1_000, bigReps: 1 } : { steps: 1_000, reps: 7, bigSteps: 10_000, bigReps },
  );
}
if (suites.has("durable")) await durableSuite({ quick });
if (suites.has("qtable")) await qtableSuite({ quick });
if (suites.has("soak")) {
  const runs = Number(process.env.SOAK_RUNS ?? (soakOnly && process.argv[3] ? process.argv[3] : quick ? 100 : 400));
  await (await import("./soak.js")).soakSuite({ runs, inFlight: Number(process.env.SOAK_IN_FLIGHT ?? 200) });
}
if (soakOnly) {
  // nothing else
} else if (suites.has("validation") || !process.env.BENCH_SUITES) {
  await (
    await import("./validation.js")
  ).validationSuite({ sizes: [1_000, 10_000], reps: quick ? 1 : 3, runSizes: quick ? [1_000] : [1_000, 10_000] });
}
// in a process of its own: once the trace SDK is set up it stays for the process's lifetime; from
// its bundle, as the server runs (a bundle renames classes: tracing-off detection once failed there only)
if (!soakOnly && (suites.has("tracing") || !process.env.BENCH_SUITES)) {
  const { bundleEntry } = await import("../scripts/bundle.js");
  spawnSync(process.execPath, [await bundleEntry("bench/tracing.ts")], { stdio: "inherit", env: process.env });
}
if (!soakOnly && (suites.has("profile") || !process.env.BENCH_SUITES))
  await (await import("./profile.js")).profileSuite({ quick });
if (!soakOnly && suites.has("limits")) await (await import("./limits.js")).limitsSuite({ quick });
if (!soakOnly && (suites.has("api") || !process.env.BENCH_SUITES)) await (await import("./api.js")).apiSuite({ quick });
if (!soakOnly && (suites.has("capacity") || !process.env.BENCH_SUITES))
  await (await import("./capacity.js")).capacitySuite({ quick });
const totalS = round((now() - t0) / 1000, 1);
log(`done in ${totalS} s (MaxListenersExceededWarning by phase: ${JSON.stringify(maxListenerWarnings)})`);
emitLine({
  suite: "meta-end",
  totalSeconds: totalS,
  maxListenersWarnings: maxListenerWarnings,
  loadavg: loadavg().map((x) => round(x, 2)),
});
