/**
 * Diagnostic (not part of `npm run bench`): runs one scheduling-suite DAG through the runtime with
 * probe steps and splits makespan - critical path into: time before the first step starts, time
 * after the last step ends, the launch delay of each step (start - when its last dependency
 * ended, i.e. when it became ready; only meaningful when concurrency does not hold it back), and
 * timer overshoot.
 *   npx tsx bench/dag-latency.ts [steps=1000] [maxConcurrency|unlimited=unlimited] [seed=42]
 */
import { createRuntime } from "../src/index.js";
import { lowerBoundMs, randomDag } from "./dag.js";
import { marks, probeSkill } from "./probe.js";
import { emitLine, median, now, round } from "./timing.js";

const n = Number(process.argv[2] ?? 1000);
const cArg = process.argv[3] ?? "unlimited";
const c = cArg === "unlimited" ? undefined : Number(cArg);
const seed = Number(process.argv[4] ?? 42);
const dag = randomDag(n, seed + n); // the same DAG as the scheduling suite
const plan = {
  steps: dag.steps.map((s, i) => ({
    stepId: s.id,
    skillName: "bench.probe",
    dependsOn: s.deps.map((d) => dag.steps[d]!.id),
    arguments: { ms: s.ms, i },
  })),
  ...(c === undefined ? {} : { maxConcurrency: c }),
};
const q = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!;

for (let rep = 0; rep < 2; rep++) {
  const rt = createRuntime({ skills: [probeSkill] });
  marks.length = 0;
  const t0 = now();
  const v = await rt.run(plan).result;
  const total = now() - t0;
  if (v.status !== "completed") throw new Error(v.status);
  const m = marks.map((x) => ({ start: x.start - t0, end: x.end - t0 }));
  const firstStart = Math.min(...m.map((x) => x.start));
  const lastEnd = Math.max(...m.map((x) => x.end));
  const launch = dag.steps.map(
    (s, i) => m[i]!.start - (s.deps.length ? Math.max(...s.deps.map((d) => m[d]!.end)) : firstStart),
  );
  const over = dag.steps.map((s, i) => m[i]!.end - m[i]!.start - s.ms);
  if (rep === 0) continue; // warm-up
  const lb = lowerBoundMs(dag, c);
  emitLine({
    suite: "dag-latency",
    steps: n,
    maxConcurrency: c ?? "unlimited",
    makespanMs: round(total, 1),
    lowerBoundMs: round(lb, 1),
    ratio: round(total / lb, 3),
    beforeFirstStepMs: round(firstStart, 1),
    afterLastStepMs: round(total - lastEnd, 1),
    launchDelayMs: {
      median: round(median(launch), 2),
      p90: round(q(launch, 0.9), 2),
      p99: round(q(launch, 0.99), 2),
      max: round(Math.max(...launch), 2),
    },
    timerOvershootMs: { median: round(median(over), 2), p90: round(q(over, 0.9), 2), max: round(Math.max(...over), 2) },
    layers: dag.layers,
  });
}
