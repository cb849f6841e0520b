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
import { perStepAll, profiled, shortFrame, summarise } from "./profile.js";
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
  const byOwner: Record<string, Record<string, number>> = {};
  const frames: Record<string, ReturnType<typeof summarise>["byFrame"]> = {};
  for (const [name, one] of Object.entries(variants)) {
    const warm = 200;
    const count = countStatements(o.db.pool);
    await many(one, warm);
    count.stop();
    const t0 = now();
    const profile = await profiled(() => many(one, runs), 1);
    const ms = now() - t0;
    const summary = summarise(profile);
    const { idle, ...busy } = summary.byOwner;
    byOwner[name] = busy;
    frames[name] = summary.byFrame;
    const total = Object.values(busy).reduce((s, v) => s + v, 0);
    emitLine({
      suite: "profile-trivial",
      variant: name,
      runs,
      msPerRun: round(ms / runs, 3),
      statementsPerRun: round(count.roundTrips / warm, 2),
      cpuMsPerRun: { total: round(total / runs, 4), ...perStepAll(busy, runs) },
    });
  }
  const owners = new Set([...Object.keys(byOwner.runtime!), ...Object.keys(byOwner.bare!)]);
  const diff: Record<string, number> = {};
  for (const k of owners) diff[k] = (byOwner.runtime![k] ?? 0) - (byOwner.bare![k] ?? 0);
  emitLine({ suite: "profile-trivial", measure: "runtime − bare", cpuMsPerRun: perStepAll(diff, runs) });
  const grown = [...frames.runtime!]
    .map(([k, e]) => ({ fn: k, owner: e.owner, ms: e.ms - (frames.bare!.get(k)?.ms ?? 0) }))
    .sort((a, b) => b.ms - a.ms)
    .slice(0, 25)
    .map((g) => ({ fn: shortFrame(g.fn), owner: g.owner, msPerRun: round(g.ms / runs, 4) }));
  emitLine({ suite: "profile-trivial", measure: "grown most", top: grown });
  const ours = [...frames.runtime!]
    .filter(([, e]) => e.owner === "ours")
    .sort((a, b) => b[1].ms - a[1].ms)
    .slice(0, 25)
    .map(([k, e]) => ({ fn: shortFrame(k), msPerRun: round(e.ms / runs, 4) }));
  emitLine({ suite: "profile-trivial", measure: "ours", top: ours });
  // Node's own frames per variant (socket writes, microtasks): what the runtime's path induces
  for (const name of Object.keys(frames))
    emitLine({
      suite: "profile-trivial",
      measure: "node",
      variant: name,
      top: [...frames[name]!]
        .filter(([, e]) => e.owner === "node")
        .sort((a, b) => b[1].ms - a[1].ms)
        .slice(0, 8)
        .map(([k, e]) => ({ fn: shortFrame(k), msPerRun: round(e.ms / runs, 4) })),
    });
} finally {
  await o.close();
}
