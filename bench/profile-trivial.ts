/**
 * Profiling helper (not part of `npm run bench`): where a trivial one-step run's CPU goes, one run
 * at a time as in the trivial-run line of the bench: the runtime's `rt.run()` of a one-step
 * `core.pass` plan against bare LangGraph's one-node graph awaiting one `task()` on the same
 * PostgresSaver (DATABASE_URL, else embedded), each profiled in-process and split by owner
 * (bench/profile.ts), per run and as runtime − bare, with wall time and statements per run.
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx bench/profile-trivial.ts [runs=1000]
 */
import { randomUUID } from "node:crypto";
import { openRuntime } from "../src/runtime/open.js";
import { countStatements } from "../src/store/commit-points.js";
import { bareGraph } from "./durable.js";
import { noopPlan } from "./overhead.js";
import { busyOf, emitRuntimeVsBare, perStepAll, profiled, summarise, topFrames, type Summary } from "./profile.js";
import { emitLine, now, round } from "./timing.js";

const runs = Number(process.argv[2] ?? 1000);
const schema = `proft_${randomUUID().replace(/-/g, "").slice(0, 10)}`;
const o = await openRuntime({ dataDir: ":memory:", schema, poolSize: 10, qtable: false });
try {
  const bare = bareGraph(o.saver);
  const variants: Record<string, () => Promise<unknown>> = {
    runtime: () => o.runtime.run(noopPlan(1, "chain")).result,
    bare: () => bare.invoke({ n: 1, shape: "chain" }, { configurable: { thread_id: randomUUID() } }),
  };
  const many = async (one: () => Promise<unknown>, count: number) => {
    for (let i = 0; i < count; i++) await one();
  };
  const summaries: Record<string, Summary> = {};
  for (const [name, one] of Object.entries(variants)) {
    const warm = 200;
    const count = countStatements(o.db.pool);
    await many(one, warm);
    count.stop();
    const t0 = now();
    const profile = await profiled(() => many(one, runs), 1);
    const ms = now() - t0;
    const summary = (summaries[name] = summarise(profile));
    const { busy, total } = busyOf(summary);
    emitLine({
      suite: "profile-trivial",
      variant: name,
      runs,
      msPerRun: round(ms / runs, 3),
      statementsPerRun: round(count.roundTrips / warm, 2),
      cpuMsPerRun: { total: round(total / runs, 4), ...perStepAll(busy, runs) },
    });
  }
  emitRuntimeVsBare("profile-trivial", "cpuMsPerRun", runs, summaries.runtime!, summaries.bare!, {
    grown: 25,
    ours: 25,
  });
  // Node's own frames per variant (socket writes, microtasks): what the runtime's path induces
  for (const [name, s] of Object.entries(summaries))
    emitLine({
      suite: "profile-trivial",
      measure: "node",
      variant: name,
      top: topFrames(s, "node", 8, "msPerRun", runs),
    });
} finally {
  await o.close();
}
