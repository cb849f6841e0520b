/**
 * Limits suite: 100 runs started at once, each one step that works `stepMs` under a shared limit:
 * a serial key (one at a time) and a resource of limit 4. Makespan against the ideal
 * `runs * stepMs / limit`, beside the same 100 runs with no limit (what 100 concurrent runs cost
 * by themselves). Backends: memory, embedded Postgres, server Postgres (when reachable).
 *   npx tsx bench/limits.ts      (BENCH_QUICK=1: 30 runs)
 */
import { randomUUID } from "node:crypto";
import pg from "pg";
import { z } from "zod";
import { abortableSleep } from "../skills/core/index.js";
import { createRuntime } from "../src/index.js";
import { openRuntime } from "../src/runtime/open.js";
import type { Runtime } from "../src/runtime/runtime.js";
import { defineSkill, type Skill } from "../src/skills/contract.js";
import { emitLine, log, now, round, isMain } from "./timing.js";

const input = z.object({ table: z.string(), ms: z.number() });
const work = (a: { ms: number }, ctx: { signal: AbortSignal }) => abortableSleep(a.ms, ctx.signal);
const skills: Skill[] = [
  defineSkill({
    name: "bench.serial",
    description: "serial by table",
    input,
    sideEffects: "write",
    idempotent: true,
    serialKey: (a: { table: string }) => a.table,
    execute: work,
  }),
  defineSkill({
    name: "bench.limited",
    description: "resource limit 4",
    input,
    sideEffects: "read",
    idempotent: true,
    resource: { name: "bench-provider", limit: 4 },
    execute: work,
  }),
  defineSkill({
    name: "bench.free",
    description: "no limit",
    input,
    sideEffects: "read",
    idempotent: true,
    execute: work,
  }),
];

async function makespan(rt: Runtime, runs: number, skillName: string, stepMs: number): Promise<number> {
  const t0 = now();
  const views = await Promise.all(
    Array.from(
      { length: runs },
      () => rt.run({ steps: [{ stepId: "s", skillName, arguments: { table: "t", ms: stepMs } }] }).result,
    ),
  );
  const ms = now() - t0;
  const bad = views.filter((v) => v.status !== "completed");
  if (bad.length) throw new Error(`${bad.length} runs ended ${bad[0]!.status}`);
  return ms;
}

export async function limitsSuite(opts: { quick: boolean }) {
  const runs = opts.quick ? 30 : 100;
  const stepMs = 20;
  const serverUrl =
    process.env.DATABASE_URL || process.env.BENCH_SERVER_URL || "postgres://postgres@127.0.0.1:5432/test";
  const probe = new pg.Pool({ connectionString: serverUrl, max: 1, connectionTimeoutMillis: 1_000 });
  const serverUp = await probe.query("SELECT 1").then(
    () => true,
    () => false,
  );
  await probe.end();
  const backends: { name: string; url?: string }[] = [
    { name: "memory" },
    { name: "embedded" },
    ...(serverUp ? [{ name: "server", url: serverUrl }] : []),
  ];
  for (const b of backends) {
    const schema = `bench_${randomUUID().replace(/-/g, "").slice(0, 10)}`;
    const o =
      b.name === "memory"
        ? { runtime: createRuntime({ skills }), close: async () => undefined, drop: async () => undefined }
        : await (async () => {
            const x = await openRuntime({ databaseUrl: b.url, dataDir: ":memory:", schema, poolSize: 10, skills });
            return {
              runtime: x.runtime,
              close: x.close,
              drop: async () =>
                void (b.url
                  ? await x.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined)
                  : undefined),
            };
          })();
    try {
      log(`limits: ${b.name}`);
      await makespan(o.runtime, 5, "bench.free", 1); // warm-up
      const free = await makespan(o.runtime, runs, "bench.free", stepMs);
      for (const [skill, limit] of [
        ["bench.serial", 1],
        ["bench.limited", 4],
      ] as const) {
        const ms = await makespan(o.runtime, runs, skill, stepMs);
        const ideal = (runs * stepMs) / limit;
        emitLine({
          suite: "limits",
          db: b.name,
          limit: skill === "bench.serial" ? "serialKey" : "resource limit 4",
          runs,
          stepMs,
          makespanMs: round(ms, 0),
          idealMs: ideal,
          ratio: round(ms / ideal, 2),
          runsPerSecond: round((runs * 1_000) / ms, 1),
          unlimitedMakespanMs: round(free, 0),
        });
      }
    } finally {
      await o.drop();
      await o.close();
    }
  }
}

if (isMain("limits")) {
  await limitsSuite({ quick: process.env.BENCH_QUICK === "1" });
  process.exit(0);
}
