/**
 * API benchmarks on loopback (autocannon and raw HTTP clients against the real server stack):
 *   api.get_run       GET /api/tool-chains/runs/:id: requests/s and latency percentiles
 *                     (from Postgres, and from the Redis view cache when REDIS_URL is set)
 *   api.runs_vs_bare  POST /api/tool-chains/run (wait) of 20-step core.wait chains, 200 in flight,
 *                     beside bare LangGraph on the same saver; api.workers: 2 ÷ 1 worker processes
 *                     (server Postgres). See api-throughput.ts.
 *   api.sse_fanout    500 SSE clients (another process) following one run: per-event delivery
 *                     latency percentiles (client receive time - event time) and completeness
 * autocannon runs in a worker thread, so the load generator does not share the server's loop.
 * Storage: DATABASE_URL (server Postgres, a fresh schema) or embedded PGlite in memory.
 */
import { spawn } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import autocannon from "autocannon";
import { cachedAuthenticator } from "../src/api/auth.js";
import { createApp, type ApiApp } from "../src/server/app.js";
import { openLive, type Live } from "../src/live/index.js";
import { openRuntime } from "../src/runtime/open.js";
import { PgAccessStore } from "../src/store/pg-access-store.js";
import { chain, runsVersusBare, waitChain, workersRatio } from "./api-throughput.js";
import { emitLine, log, round, isMain } from "./timing.js";

interface Served {
  url: string;
  api: ApiApp;
  server: Server;
  live: Live;
}

async function serve(
  o: Awaited<ReturnType<typeof openRuntime>>,
  access: PgAccessStore,
  redisUrl?: string,
  liveViewBytes?: number,
  execution: "inline" | "queue" = "inline",
): Promise<Served> {
  const live = await openLive({ store: o.runtime.store, db: o.db, redisUrl });
  const api = createApp({
    runtime: o.runtime,
    execution,
    auth: cachedAuthenticator(access),
    live,
    limits: { requestsPerMinute: 0, requestsPerMinutePerIp: 0, maxWaitMs: 600_000, liveViewBytes },
    metrics: true,
  });
  const server = createServer(api.app);
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, api, server, live };
}

async function stop(s: Served): Promise<void> {
  await s.api.close();
  s.server.closeAllConnections();
  await new Promise<void>((r) => s.server.close(() => r()));
  await s.live.close();
}

const lat = (l: autocannon.Histogram) => ({
  p50: l.p50,
  p90: l.p90,
  p99: l.p99,
  p99_9: l.p99_9,
  max: l.max,
  mean: round(l.average, 2),
});

async function post(url: string, key: string, body: unknown): Promise<any> {
  const r = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return r.json();
}

/**
 * `n` SSE clients in a child process (plain Node, no TypeScript): every client must receive every
 * event 1..last in order; delivery latency = receive time - the event's `at`, for events emitted
 * after all clients were connected.
 */
const CLIENTS_JS = `
const http = require("node:http");
const [url, key, n] = process.argv.slice(1);
const agent = new http.Agent({ keepAlive: true, maxSockets: Number(n) + 10 });
const t0 = Date.now();
let connected = 0, allAt = Infinity;
const got = [];
const done = [];
for (let i = 0; i < Number(n); i++) {
  const evs = []; got.push(evs);
  done.push(new Promise((resolve, reject) => {
    const req = http.request(url, { agent, headers: { authorization: "Bearer " + key, accept: "text/event-stream" } }, (res) => {
      if (++connected === Number(n)) allAt = Date.now();
      let buf = "";
      res.setEncoding("utf8");
      res.on("data", (d) => {
        buf += d;
        let k;
        while ((k = buf.indexOf("\\n\\n")) >= 0) {
          const block = buf.slice(0, k); buf = buf.slice(k + 2);
          const line = block.split("\\n").find((l) => l.startsWith("data: "));
          if (!line) continue;
          const e = JSON.parse(line.slice(6));
          evs.push({ seq: e.seq, at: Date.parse(e.at), t: Date.now() });
        }
      });
      res.on("end", resolve); res.on("error", reject);
    });
    req.on("error", reject); req.end();
  }));
}
Promise.all(done).then(() => {
  const last = Math.max(...got.map((g) => g.length ? g[g.length - 1].seq : 0));
  const complete = got.filter((g) => g.length === last && g.every((e, j) => e.seq === j + 1)).length;
  const lags = got.flatMap((g) => g.filter((e) => e.at >= allAt).map((e) => e.t - e.at)).sort((a, b) => a - b);
  const p = (q) => lags.length ? lags[Math.min(lags.length - 1, Math.ceil(q / 100 * lags.length) - 1)] : null;
  const lastAt = got.map((g) => g[g.length - 1]).filter(Boolean);
  process.stdout.write(JSON.stringify({ connected, connectMs: allAt - t0, events: last, complete,
    deliveryLatencyMs: { p50: p(50), p90: p(90), p99: p(99), max: lags.length ? lags[lags.length - 1] : null, samples: lags.length },
    lastEventToAllClientsMs: Math.max(...lastAt.map((e) => e.t)) - lastAt[0].at }));
  agent.destroy();
}, (e) => { console.error(e); process.exit(1); });
`;

function sseClients(
  url: string,
  key: string,
  n: number,
): Promise<{
  connected: number;
  connectMs: number;
  events: number;
  complete: number;
  deliveryLatencyMs: Record<string, number | null>;
  lastEventToAllClientsMs: number;
}> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["-e", CLIENTS_JS, url, key, String(n)], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`SSE clients exited with ${code}`)),
    );
  });
}

export async function apiSuite(opts: { quick: boolean }): Promise<void> {
  const url = process.env.DATABASE_URL || undefined;
  const schema = `bench_api_${Date.now().toString(36)}`;
  const o = await openRuntime({ databaseUrl: url, dataDir: ":memory:", schema, poolSize: 10 });
  const backend = o.db.kind === "server" ? "postgres-server" : "postgres-embedded";
  const access = new PgAccessStore(o.db);
  await access.ensureWorkspace("bench");
  const key = (await access.createKey("bench")).key;
  const served: Served[] = [];
  try {
    const db = await serve(o, access);
    served.push(db);
    // the same runtime behind an API without the in-process view cache: the previous figure, side by side
    const uncached = await serve(o, access, undefined, 0);
    served.push(uncached);

    // BENCH_API=get: only the GET measurements; BENCH_API=runs: only the sustained runs;
    // BENCH_API=runs_vs_bare: only the sustained runs in this process (no worker processes)
    const only = process.env.BENCH_API;
    // ---- GET /runs/:id ----
    // a finished run (its view is immutable: kept in process), and a run waiting for confirmation
    // (computed from the checkpoint and the store on every request, or served by the Redis cache)
    const done = await post(`${db.url}/api/tool-chains/run`, key, { plan: chain(20, 0) });
    const waitingPlan = chain(20, 0);
    (waitingPlan.steps[19] as Record<string, unknown>).requireConfirmation = true;
    const waiting = await post(`${db.url}/api/tool-chains/run`, key, { plan: waitingPlan });
    if (waiting.status !== "waiting_confirmation") throw new Error(`expected a waiting run, got ${waiting.status}`);
    // a running run whose view holds still (one long step): the cache serves it between changes
    const running = await post(`${db.url}/api/tool-chains/run`, key, {
      plan: chain(2, 0, { stepId: "hold", ms: 600_000 }),
      wait: false,
    });
    const targets: [string, string, Served, string][] = [
      [done.runId, "process (finished run)", db, "completed"],
      [waiting.runId, "none (computed)", uncached, "waiting_confirmation"],
      [waiting.runId, "process (versioned)", db, "waiting_confirmation"],
      [running.runId, "none (computed)", uncached, "running"],
      [running.runId, "process (versioned)", db, "running"],
    ];
    if (process.env.REDIS_URL) {
      const cached = await serve(o, access, process.env.REDIS_URL);
      served.push(cached);
      targets.push([waiting.runId, "redis", cached, "waiting_confirmation"]);
    }
    const runsOnly = only === "runs" || only === "runs_vs_bare";
    for (const [runId, cache, s, status] of runsOnly ? [] : targets) {
      const r = await autocannon({
        url: `${s.url}/api/tool-chains/runs/${runId}`,
        headers: { authorization: `Bearer ${key}` },
        connections: 50,
        duration: opts.quick ? 3 : 10,
        workers: 1,
      });
      emitLine({
        suite: "api",
        name: "get_run",
        backend,
        runStatus: status,
        cache,
        connections: 50,
        seconds: r.duration,
        reqPerSec: round(r.requests.average, 1),
        latencyMs: lat(r.latency),
        non2xx: r.non2xx,
        errors: r.errors,
        timeouts: r.timeouts,
      });
      log(`api.get_run (${status}, cache ${cache}): ${round(r.requests.average, 0)} req/s, p99 ${r.latency.p99} ms`);
    }
    await post(`${db.url}/api/tool-chains/runs/${running.runId}/cancel`, key, { wait: true });

    // ---- sustained runs: 20-step core.wait chains, 200 in flight, beside bare LangGraph ----
    if (only !== "get") {
      const inFlight = opts.quick ? 50 : 200;
      // whole waves: with every run in flight progressing together, a time window would cut a wave
      const amount = inFlight * (opts.quick ? 2 : 3);
      const run = async () => (await o.runtime.run(waitChain()).result).status;
      await runsVersusBare(
        { saver: o.saver, drain: () => o.runtime.drain(), run },
        db.url,
        key,
        backend,
        amount,
        inFlight,
      );
      // server Postgres: an API-only process in front of 1, then 2 worker processes
      if (o.db.kind === "server" && url && only !== "runs_vs_bare") {
        const queued = await serve(o, access, undefined, undefined, "queue");
        served.push(queued);
        await workersRatio(queued.url, key, { DATABASE_URL: url, TOOLCHAIN_SCHEMA: schema }, amount, inFlight);
      }
    }

    // ---- SSE fan-out: 500 clients of one run (in a child process: not on the server's event loop) ----
    if (only === undefined) {
      const clients = Number(process.env.BENCH_SSE_CLIENTS ?? (opts.quick ? 100 : 500));
      const holdMs = opts.quick ? 2_000 : 5_000;
      const started = await post(`${db.url}/api/tool-chains/run`, key, {
        plan: chain(20, 10, { stepId: "hold", ms: holdMs }),
        wait: false,
      });
      const out = await sseClients(`${db.url}/api/tool-chains/runs/${started.runId}/events`, key, clients);
      emitLine({ suite: "api", name: "sse_fanout", backend, clients, ...out });
      log(`api.sse_fanout: ${out.complete}/${clients} complete, delivery p99 ${out.deliveryLatencyMs.p99} ms`);
    }
  } finally {
    for (const s of served) await stop(s);
    await o.runtime.drain();
    if (o.db.kind === "server") await o.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
    await o.close();
  }
}

// standalone: `npx tsx bench/api.ts` (BENCH_QUICK=1 for a smoke run)
if (isMain("api")) {
  await apiSuite({ quick: process.env.BENCH_QUICK === "1" });
}
