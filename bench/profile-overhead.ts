/**
 * Profiling helper (not part of `npm run bench`): runs one overhead variant a few times so a CPU
 * profile shows where per-step time goes, e.g.
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/profile-overhead.ts runtime chain 1000 5
 *   npx tsx bench/profile-overhead.ts bareTask fanout 10000 1
 */
import { bareTaskRun, rawRun, runtimeRun, type Shape } from "./overhead.js";
import { log, round } from "./timing.js";

const [variant = "runtime", shape = "chain", nArg = "1000", repsArg = "5"] = process.argv.slice(2);
const n = Number(nArg);
const reps = Number(repsArg);
const fn = variant === "bareTask" ? bareTaskRun : variant === "raw" ? rawRun : runtimeRun;
await fn(Math.min(n, 200), shape as Shape); // warm-up
for (let r = 0; r < reps; r++) {
  const ms = await fn(n, shape as Shape);
  log(`${variant} ${shape} ${n}: ${round(ms, 1)} ms total, ${round(ms / n, 4)} ms/step`);
}
