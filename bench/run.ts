/**
 * `npm run bench`: every suite in one process, one JSON object per line on stdout (logs on stderr).
 * BENCH_QUICK=1 shrinks every size for a smoke test (well under a minute).
 * BENCH_SUITES=scheduling,overhead selects suites (default: both).
 */
import { createRequire } from "node:module";
import { overheadSuite } from "./overhead.js";
import { schedulingSuite } from "./scheduling.js";
import { emitLine, log, now, round } from "./timing.js";

const quick = process.env.BENCH_QUICK === "1";
const suites = new Set((process.env.BENCH_SUITES ?? "scheduling,overhead").split(",").map((s) => s.trim()));
const require = createRequire(import.meta.url);
const lgVersion = (require("@langchain/langgraph/package.json") as { version: string }).version;

emitLine({ suite: "meta", quick, node: process.version, langgraph: lgVersion, gcExposed: typeof (globalThis as { gc?: unknown }).gc === "function", startedAt: new Date().toISOString() });
const t0 = now();

if (suites.has("scheduling")) {
  await schedulingSuite({
    sizes: quick ? [50, 100] : [50, 200, 1_000],
    concurrencies: [4, 16, undefined],
    seed: 42,
  });
}
if (suites.has("overhead")) {
  await overheadSuite(quick ? { steps: 200, reps: 3, bigSteps: 1_000, bigReps: 1 } : { steps: 1_000, reps: 7, bigSteps: 10_000, bigReps: 3 });
}
log(`done in ${round((now() - t0) / 1000, 1)} s`);
