/**
 * Profiling helper (not part of `npm run bench`): where CPU goes per step when many runs are in
 * flight, as in the API line of the bench (600 runs of 20-step `core.wait` chains, 200 at a time)
 * but in-process, without the request: the runtime's `rt.run()` against bare LangGraph `task()`
 * chains on the same PostgresSaver (DATABASE_URL, else embedded), each profiled in-process and
 * split by owner (bench/profile.ts), per step and as runtime − bare, with statements per run.
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx bench/profile-inflight.ts [runs=600] [inFlight=200]
 */
import { randomUUID } from "node:crypto";
import { openRuntime } from "../src/runtime/open.js";
import { countStatements } from "../src/store/commit-points.js";
import { bareChainGraph, keepInFlight, STEPS, waitChain } from "./api-throughput.js";
import { busyOf, emitRuntimeVsBare, perStepAll, profiled, summarise, type Summary } from "./profile.js";
import { emitLine, now, round } from "./timing.js";

const runs = Number(process.argv[2] ?? 600);
const inFlight = Number(process.argv[3] ?? 200);
const schema = `prof_${randomUUID().replace(/-/g, "").slice(0, 10)}`;
const o = await openRuntime({ dataDir: ":memory:", schema, poolSize: 10, qtable: false });
try {
  const bare = bareChainGraph(o.saver);
  const variants: Record<string, () => Promise<unknown>> = {
    runtime: () => o.runtime.run(waitChain()).result,
    bareTask: () => bare.invoke({ n: STEPS }, { configurable: { thread_id: randomUUID() } }),
  };
  const many = (one: () => Promise<unknown>, count: number) => keepInFlight(one, count, inFlight);
  const summaries: Record<string, Summary> = {};
  const steps = runs * STEPS;
  for (const [name, one] of Object.entries(variants)) {
    // warm-up (JIT, pool), outside the profile; its statements are counted (a counter in the
    // profile would show as our code in both variants)
    const warm = Math.min(runs, inFlight);
    const count = countStatements(o.db.pool);
    await many(one, warm);
    count.stop();
    const t0 = now();
    const profile = await profiled(() => many(one, runs), 1);
    const seconds = (now() - t0) / 1000;
    const summary = (summaries[name] = summarise(profile));
    const { busy, total } = busyOf(summary);
    const idle = summary.byOwner.idle;
    emitLine({
      suite: "profile-inflight",
      variant: name,
      runs,
      inFlight,
      stepsPerSec: round(steps / seconds, 1),
      idleShare: round((idle ?? 0) / (total + (idle ?? 0)), 3),
      // statements per run on the pool, by what they write
      statementsPerRun: round(count.roundTrips / warm, 2),
      writesPerRun: Object.fromEntries(Object.entries(count.writes).map(([k, v]) => [k, round(v / warm, 2)])),
      msPerStep: { total: round(total / steps, 4), ...perStepAll(busy, steps) },
    });
  }
  emitRuntimeVsBare("profile-inflight", "msPerStep", steps, summaries.runtime!, summaries.bareTask!);
} finally {
  await o.close();
}
