/**
 * Profiling helper (not part of `npm run bench`): the durable runtime or bare LangGraph task()
 * on the same PostgresSaver (DATABASE_URL, else embedded), so a CPU profile shows where per-step
 * time goes beyond LangGraph's task path, e.g.
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --cpu-prof --cpu-prof-dir=/tmp/prof \
 *     --import tsx bench/profile-durable.ts runtime chain 1000 5
 * Variants: runtime | bare | trivial (one-step runs, n of them) | bare-trivial.
 */
import { randomUUID } from "node:crypto";
import { openRuntime } from "../src/runtime/open.js";
import { bareGraph } from "./durable.js";
import { noopPlan, type Shape } from "./overhead.js";
import { log, now, round } from "./timing.js";

const [variant = "runtime", shape = "chain", nArg = "1000", repsArg = "5"] = process.argv.slice(2);
const n = Number(nArg);
const reps = Number(repsArg);
const schema = `prof_${randomUUID().replace(/-/g, "").slice(0, 10)}`;
const o = await openRuntime({ dataDir: ":memory:", schema, poolSize: 10, qtable: false });
try {
  const bare = bareGraph(o.saver);
  const once = async (steps: number) => {
    if (variant === "runtime") {
      const v = await o.runtime.run(noopPlan(steps, shape as Shape)).result;
      if (v.status !== "completed") throw new Error(v.status);
    } else if (variant === "bare") {
      await bare.invoke({ n: steps, shape: shape as Shape }, { configurable: { thread_id: randomUUID() } });
    } else if (variant === "trivial") {
      for (let i = 0; i < steps; i++) await o.runtime.run(noopPlan(1, "chain")).result;
    } else {
      for (let i = 0; i < steps; i++)
        await bare.invoke({ n: 1, shape: "chain" }, { configurable: { thread_id: randomUUID() } });
    }
  };
  await once(Math.min(n, 50)); // warm-up
  for (let r = 0; r < reps; r++) {
    const t0 = now();
    await once(n);
    const ms = now() - t0;
    log(`${variant} ${shape} ${n}: ${round(ms, 1)} ms total, ${round(ms / n, 4)} ms/step`);
  }
} finally {
  if (o.db.kind === "server") await o.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
  await o.close();
}
process.exit(0);
