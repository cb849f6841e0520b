/**
 * Profiling helper (not part of `npm run bench`): where a trivial one-step run's wall time goes.
 * Prints each statement of one run (start and end relative to the run's start, its first words)
 * and the gaps between them, for the runtime and for a bare one-node graph on the same saver:
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx bench/trivial-timeline.ts
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { openRuntime } from "../src/runtime/open.js";
import { bareGraph } from "./durable.js";
import { noopPlan } from "./overhead.js";
import { now, round } from "./timing.js";

type Line = { t0: number; t1: number; text: string };
let lines: Line[] | undefined;
const patched = new WeakSet<object>();
/** Every statement of every client the pool hands out, timed (callback and promise forms). */
function timeStatements(pool: pg.Pool): void {
  pool.on("acquire", (client) => {
    if (patched.has(client)) return;
    patched.add(client);
    const orig = client.query.bind(client) as (...a: unknown[]) => unknown;
    (client as unknown as { query: (...a: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const first = args[0] as string | { text?: string } | undefined;
      const text = typeof first === "string" ? first : String(first?.text ?? "");
      const rec = lines ? { t0: now(), t1: 0, text: text.replace(/\s+/g, " ").trim().slice(0, 80) } : undefined;
      if (rec) lines!.push(rec);
      const cbAt = args.findIndex((a) => typeof a === "function");
      if (rec && cbAt >= 0) {
        const cb = args[cbAt] as (...x: unknown[]) => void;
        args[cbAt] = (...x: unknown[]) => {
          rec.t1 = now();
          cb(...x);
        };
      }
      const r = orig(...args);
      if (rec && cbAt < 0 && r && typeof (r as Promise<unknown>).then === "function")
        void (r as Promise<unknown>).then(
          () => (rec.t1 = now()),
          () => (rec.t1 = now()),
        );
      return r;
    };
  });
}

const schema = `tl_${randomUUID().replace(/-/g, "").slice(0, 10)}`;
const o = await openRuntime({ dataDir: ":memory:", schema, poolSize: 10, qtable: false });
timeStatements(o.db.pool);
const bare = bareGraph(o.saver);
const variants = {
  runtime: async () => void (await o.runtime.run(noopPlan(1, "chain")).result),
  bare: async () => void (await bare.invoke({ n: 1, shape: "chain" }, { configurable: { thread_id: randomUUID() } })),
};
try {
  for (let i = 0; i < 30; i++) for (const v of Object.values(variants)) await v(); // warm-up
  for (const [name, run] of Object.entries(variants)) {
    lines = [];
    const t = now();
    await run();
    const total = now() - t;
    const mine = lines;
    lines = undefined;
    console.log(`\n== ${name}: ${round(total, 2)} ms, ${mine.length} statements`);
    let last = 0;
    for (const l of mine) {
      const s = l.t0 - t;
      console.log(
        `${round(s, 2).toString().padStart(7)} +gap ${round(s - last, 2)
          .toString()
          .padStart(6)}  ${round(l.t1 - l.t0, 2)
          .toString()
          .padStart(6)} ms  ${l.text}`,
      );
      last = Math.max(last, l.t1 - t);
    }
    console.log(`${round(total, 2).toString().padStart(7)} +gap ${round(total - last, 2)} (end)`);
  }
} finally {
  await o.close();
}
