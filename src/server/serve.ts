/**
 * The server process: the HTTP API and, unless disabled, the executor (runs execute in this
 * process; queued and orphaned runs are taken over by its worker loop). Configuration comes
 * from the environment (configFromEnv); see README "Configuration".
 */
import { mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { cachedAuthenticator } from "../api/auth.js";
import { createApp, type ApiApp, type AppLimits } from "../api/app.js";
import type { Execution } from "../api/run-service.js";
import { openLive, type Live } from "../live/index.js";
import { openRuntime, type OpenedRuntime, type OpenRuntimeOptions } from "../runtime/open.js";
import { PgAccessStore } from "../store/pg-access-store.js";

export interface ConfiguredKey {
  workspace: string;
  /** The key itself; it is stored hashed. */
  key: string;
  /** Skill allowlist of the workspace (names or `pack.*`); absent: unchanged (new workspaces: every skill). */
  skills?: string[];
}

export interface ServeConfig {
  port: number;
  host: string;
  databaseUrl?: string;
  dataDir: string;
  schema?: string;
  redisUrl?: string;
  viewCacheTtlSeconds?: number;
  /** inline: this process executes the runs it starts; queue: workers do. */
  execution: Execution;
  /** Run the worker loop here (queued runs, runs of dead processes). */
  worker: boolean;
  workerPollMs: number;
  keys: ConfiguredKey[];
  /** Create a "local" workspace and print its key when no key exists. @default true when embedded */
  devKey: boolean;
  limits: AppLimits;
  authCacheMs: number;
}

const num = (v: string | undefined, d: number) => (v === undefined || v === "" ? d : Number(v));

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): ServeConfig {
  const role = env.TOOLCHAIN_ROLE ?? "all"; // all | api
  if (role !== "all" && role !== "api") throw new TypeError(`Expected TOOLCHAIN_ROLE to be "all" or "api", got "${role}"`);
  const keys = env.TOOLCHAIN_API_KEYS ? (JSON.parse(env.TOOLCHAIN_API_KEYS) as ConfiguredKey[]) : [];
  if (!Array.isArray(keys) || keys.some((k) => typeof k?.workspace !== "string" || typeof k?.key !== "string" || k.key.length < 32)) {
    throw new TypeError('Expected TOOLCHAIN_API_KEYS to be a JSON array of {"workspace": "...", "key": "<at least 32 characters>", "skills"?: [...]}');
  }
  const databaseUrl = env.DATABASE_URL || undefined;
  return {
    port: num(env.PORT, 8080),
    host: env.HOST ?? "127.0.0.1",
    databaseUrl,
    dataDir: env.TOOLCHAIN_DATA_DIR ?? ".data/pglite",
    schema: env.TOOLCHAIN_SCHEMA || undefined,
    redisUrl: env.REDIS_URL || undefined,
    viewCacheTtlSeconds: num(env.TOOLCHAIN_VIEW_CACHE_TTL_S, 3_600),
    execution: role === "api" ? "queue" : "inline",
    worker: role === "all",
    workerPollMs: num(env.TOOLCHAIN_WORKER_POLL_MS, 1_000),
    keys,
    devKey: env.TOOLCHAIN_DEV_KEY !== undefined ? env.TOOLCHAIN_DEV_KEY === "1" : !databaseUrl,
    limits: {
      bodyBytes: num(env.TOOLCHAIN_MAX_BODY_BYTES, 1_048_576),
      requestsPerMinute: num(env.TOOLCHAIN_RATE_LIMIT_PER_MIN, 600),
      maxWaitMs: num(env.TOOLCHAIN_MAX_WAIT_MS, 300_000),
    },
    authCacheMs: num(env.TOOLCHAIN_AUTH_CACHE_MS, 5_000),
  };
}

export interface RunningServer {
  url: string;
  port: number;
  opened: OpenedRuntime;
  access: PgAccessStore;
  api: ApiApp;
  live: Live;
  server: Server;
  /** Set on the start that created the local development workspace. */
  devKey?: string;
  close(): Promise<void>;
}

/** Where the local development key is kept (embedded mode, beside the data directory). */
export function devKeyFile(dataDir: string): string | undefined {
  return dataDir === ":memory:" ? undefined : path.join(path.dirname(path.resolve(dataDir)), "local-api-key");
}

export async function startServer(cfg: ServeConfig, runtimeOpts: Omit<OpenRuntimeOptions, "databaseUrl" | "dataDir" | "schema"> = {}, log: (line: string) => void = (l) => console.error(l)): Promise<RunningServer> {
  const opened = await openRuntime({ ...runtimeOpts, databaseUrl: cfg.databaseUrl, dataDir: cfg.dataDir, schema: cfg.schema });
  const { runtime, db } = opened;
  const access = new PgAccessStore(db);
  let live: Live | undefined;
  try {
    for (const k of cfg.keys) {
      await access.ensureWorkspace(k.workspace, k.skills ? { allowedSkills: k.skills } : {});
      await opened.tables?.ensureWorkspace(k.workspace); // its demo "Tasks" table
      await access.createKey(k.workspace, { key: k.key, label: "configured" });
    }
    let devKey: string | undefined;
    if (cfg.devKey && (await access.countKeys()) === 0) {
      await access.ensureWorkspace("local");
      await opened.tables?.ensureWorkspace("local");
      devKey = (await access.createKey("local", { label: "local development" })).key;
      const file = devKeyFile(cfg.dataDir);
      if (file && db.kind === "embedded") {
        mkdirSync(path.dirname(file), { recursive: true });
        writeFileSync(file, `${devKey}\n`, { mode: 0o600 });
      }
    }
    live = await openLive({ store: runtime.store, db, redisUrl: cfg.redisUrl, viewCacheTtlSeconds: cfg.viewCacheTtlSeconds });
    const api = createApp({
      runtime,
      auth: cachedAuthenticator(access, cfg.authCacheMs),
      live,
      execution: cfg.execution,
      tables: opened.tables,
      limits: cfg.limits,
      ready: async () => void (await db.pool.query("SELECT 1")),
    });
    const server = createServer(api.app);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(cfg.port, cfg.host, () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    const url = `http://${cfg.host.includes(":") ? `[${cfg.host}]` : cfg.host}:${port}`;
    const stopWorker = cfg.worker ? runtime.startWorker({ pollMs: cfg.workerPollMs }) : async () => undefined;

    log(`toolchain API on ${url} (${db.kind === "server" ? "Postgres server" : `embedded Postgres in ${cfg.dataDir}`}; live events via ${live.transport}${cfg.redisUrl ? " + Redis view cache" : ""}; ${cfg.worker ? "executing runs here" : "API only: runs are queued for workers"})`);
    if (devKey) {
      log(`created workspace "local" with API key:\n\n  ${devKey}\n`);
      const file = devKeyFile(cfg.dataDir);
      if (file && db.kind === "embedded") log(`(saved to ${file}; try: curl -H "Authorization: Bearer $(cat ${path.relative(process.cwd(), file)})" ${url}/api/skills)`);
    } else if (cfg.devKey && db.kind === "embedded") {
      const file = devKeyFile(cfg.dataDir);
      if (file && existsSync(file)) log(`local development key: ${readFileSync(file, "utf8").trim()}`);
    }
    const finalLive = live;
    let closing: Promise<void> | undefined;
    return {
      url,
      port,
      opened,
      access,
      api,
      live,
      server,
      devKey,
      close: () =>
        (closing ??= (async () => {
          await stopWorker();
          await api.close();
          const closed = new Promise<void>((r) => server.close(() => r()));
          server.closeIdleConnections();
          // requests waiting for runs: give them a moment, then cut
          const cut = setTimeout(() => server.closeAllConnections(), 2_000);
          await closed;
          clearTimeout(cut);
          await finalLive.close();
          await opened.close();
        })()),
    };
  } catch (e) {
    await live?.close().catch(() => undefined);
    await opened.close();
    throw e;
  }
}
