/**
 * Profiling helper (not part of `npm run bench`): where a MemorySaver chain step's CPU goes, the
 * runtime's n-step `core.pass` chain against bare LangGraph's n awaited `task()`s, each profiled
 * in-process and split by owner (bench/profile.ts), per step and as runtime − bare:
 * each variant's profile written to BENCH_OUT (default .cache/bench) as profile-memory-<variant>.cpuprofile.
 * Run it as the product runs, from its bundle (under tsx our files pay its `__name` wrappers):
 *   npx tsx scripts/bundle.ts bench/profile-memory.ts && node .cache/dist/bench__profile-memory.mjs [steps=1000] [reps=5] [shape=chain]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { bareTaskRun, runtimeRun, type Shape } from "./overhead.js";
import { busyOf, emitRuntimeVsBare, perStepAll, profiled, summarise, type Summary } from "./profile.js";
import { emitLine, now, round } from "./timing.js";

const n = Number(process.argv[2] ?? 1000);
const reps = Number(process.argv[3] ?? 5);
const shape = (process.argv[4] ?? "chain") as Shape;
const variants: Record<string, () => Promise<number>> = {
  runtime: () => runtimeRun(n, shape),
  bare: () => bareTaskRun(n, shape),
};
const summaries: Record<string, Summary> = {};
const outDir = resolve(process.env.BENCH_OUT ?? join(".cache", "bench"));
mkdirSync(outDir, { recursive: true });
for (const [name, one] of Object.entries(variants)) {
  await one(); // warm-up
  const t0 = now();
  const profile = await profiled(one, reps);
  const ms = now() - t0;
  writeFileSync(join(outDir, `profile-memory-${name}.cpuprofile`), JSON.stringify(profile));
  const summary = (summaries[name] = summarise(profile));
  const { busy, total } = busyOf(summary);
  emitLine({
    suite: "profile-memory",
    variant: name,
    shape,
    steps: n,
    msPerStep: round(ms / (n * reps), 4),
    cpuMsPerStep: { total: round(total / (n * reps), 4), ...perStepAll(busy, n * reps) },
  });
}
emitRuntimeVsBare("profile-memory", "cpuMsPerStep", n * reps, summaries.runtime!, summaries.bare!, {
  grown: 30,
  ours: 30,
});
