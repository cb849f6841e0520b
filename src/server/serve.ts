/**
 * The server process: the HTTP API and, unless disabled, the executor (runs execute in this
 * process; queued and orphaned runs are taken over by its worker loop). Configuration comes
 * from the environment (configFromEnv); see README "Configuration".
 */
import { chmodSync, mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { cachedAuthenticator } from "../api/auth.js";
import { oidcFromEnv, withOidc, type OidcConfig } from "../api/oidc.js";
import { createApp, serverTimeouts, type ApiApp, type AppLimits, type McpOptions } from "./app.js";
import type { Execution } from "../service/run-service.js";
import { openLive, type Live } from "../live/index.js";
import { openRuntime, type OpenedRuntime, type OpenRuntimeOptions } from "../runtime/open.js";
import { PgAccessStore } from "../store/pg-access-store.js";
import { defaultDataDir } from "../store/db.js";
import { assertKeyUser, KEY_PERMISSIONS, type ConfiguredKey } from "../store/access-store.js";
import { MAX_TIMER_MS } from "../plan/schema.js";
import { maxValueBytes } from "../kernel/value-budget.js";
import type { SseOptions } from "../api/sse.js";

export type { ConfiguredKey };

export interface ServeConfig {
  /** Single sign-on (TOOLCHAIN_OIDC_*): bearer JWTs from the identity provider. */
  oidc?: OidcConfig;
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
  /** Runs one process executes at once before it stops claiming more (TOOLCHAIN_WORKER_MAX_ACTIVE). */
  workerMaxActive: number;
  keys: ConfiguredKey[];
  /** Create a "local" workspace and print its key when no key exists. @default true when embedded */
  devKey: boolean;
  limits: AppLimits;
  authCacheMs: number;
  mcp: McpOptions;
  /** Unknown key hashes are remembered this long (no database query for them). */
  authNegativeCacheMs: number;
  sse: SseOptions;
  /** /metrics requires this bearer token when set. */
  metricsToken?: string;
}

const num = (v: string | undefined, d: number) => (v === undefined || v === "" ? d : Number(v));

/** A non-negative integer from the environment, within what Node's timers (and sane memory) hold. */
function bounded(env: NodeJS.ProcessEnv, name: string, d: number, max = MAX_TIMER_MS, min = 0): number {
  const v = num(env[name], d);
  if (!Number.isInteger(v) || v < min || v > max)
    throw new TypeError(`Expected ${name} to be an integer from ${min} to ${max}, got "${env[name]}"`);
  return v;
}

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): ServeConfig {
  const role = env.TOOLCHAIN_ROLE ?? "all"; // all | api
  if (role !== "all" && role !== "api")
    throw new TypeError(`Expected TOOLCHAIN_ROLE to be "all" or "api", got "${role}"`);
  const keys = env.TOOLCHAIN_API_KEYS ? (JSON.parse(env.TOOLCHAIN_API_KEYS) as ConfiguredKey[]) : [];
  const badPermissions = (k: ConfiguredKey) =>
    k.permissions !== undefined &&
    (!Array.isArray(k.permissions) || k.permissions.some((p) => !KEY_PERMISSIONS.includes(p)));
  if (
    !Array.isArray(keys) ||
    keys.some(
      (k) => typeof k?.workspace !== "string" || typeof k?.key !== "string" || k.key.length < 32 || badPermissions(k),
    )
  ) {
    throw new TypeError(
      `Expected TOOLCHAIN_API_KEYS to be a JSON array of {"workspace": "...", "key": "<at least 32 characters>", "skills"?: [...], "permissions"?: [${KEY_PERMISSIONS.map((p) => `"${p}"`).join(", ")}]}`,
    );
  }
  keys.forEach((k, i) => {
    if (k.user === undefined) return;
    try {
      assertKeyUser(k.user, `TOOLCHAIN_API_KEYS[${i}].user`);
    } catch (e) {
      throw new TypeError(`Expected ${(e as Error).message}`);
    }
  });
  const databaseUrl = env.DATABASE_URL || undefined;
  maxValueBytes(env); // read where values are made (src/kernel/value-budget.ts); a bad value fails the start, not a run
  const oidc = oidcFromEnv(env);
  return {
    ...(oidc ? { oidc } : {}),
    port: num(env.PORT, 8080),
    host: env.HOST ?? "127.0.0.1",
    databaseUrl,
    dataDir: env.TOOLCHAIN_DATA_DIR ?? defaultDataDir(env),
    schema: env.TOOLCHAIN_SCHEMA || undefined,
    redisUrl: env.REDIS_URL || undefined,
    viewCacheTtlSeconds: bounded(env, "TOOLCHAIN_VIEW_CACHE_TTL_S", 3_600, 365 * 86_400),
    execution: role === "api" ? "queue" : "inline",
    worker: role === "all",
    workerPollMs: bounded(env, "TOOLCHAIN_WORKER_POLL_MS", 1_000),
    workerMaxActive: bounded(env, "TOOLCHAIN_WORKER_MAX_ACTIVE", 50, 100_000, 1),
    keys,
    devKey: env.TOOLCHAIN_DEV_KEY !== undefined ? env.TOOLCHAIN_DEV_KEY === "1" : !databaseUrl,
    limits: {
      bodyBytes: bounded(env, "TOOLCHAIN_MAX_BODY_BYTES", 1_048_576, 2 ** 30),
      requestsPerMinute: bounded(env, "TOOLCHAIN_RATE_LIMIT_PER_MIN", 600, 1e9),
      requestsPerMinutePerIp: bounded(env, "TOOLCHAIN_RATE_LIMIT_PER_IP_PER_MIN", 1_200, 1e9),
      maxWaitMs: bounded(env, "TOOLCHAIN_MAX_WAIT_MS", 300_000),
      streamsPerKey: bounded(env, "TOOLCHAIN_MAX_STREAMS_PER_KEY", 20, 1e6),
      finishedViewBytes: bounded(env, "TOOLCHAIN_VIEW_CACHE_BYTES", 32 * 1024 * 1024, 2 ** 40),
      liveViewBytes: bounded(env, "TOOLCHAIN_LIVE_VIEW_CACHE_BYTES", 16 * 1024 * 1024, 2 ** 40),
      ...(env.TOOLCHAIN_VIEW_CACHE_BYTES_PER_WORKSPACE
        ? { finishedViewBytesPerWorkspace: bounded(env, "TOOLCHAIN_VIEW_CACHE_BYTES_PER_WORKSPACE", 0, 2 ** 40) }
        : {}),
      ...(env.TOOLCHAIN_LIVE_VIEW_CACHE_BYTES_PER_WORKSPACE
        ? { liveViewBytesPerWorkspace: bounded(env, "TOOLCHAIN_LIVE_VIEW_CACHE_BYTES_PER_WORKSPACE", 0, 2 ** 40) }
        : {}),
    },
    mcp: {
      elicitationTimeoutMs: num(env.TOOLCHAIN_MCP_ELICITATION_TIMEOUT_MS, 300_000),
      sessionIdleMs: num(env.TOOLCHAIN_MCP_SESSION_IDLE_MS, 1_800_000),
      maxSessions: bounded(env, "TOOLCHAIN_MCP_MAX_SESSIONS", 10_000, 1e7, 1),
      maxSessionsPerKey: bounded(env, "TOOLCHAIN_MCP_MAX_SESSIONS_PER_KEY", 100, 1e7, 1),
      maxSessionsPerWorkspace: bounded(env, "TOOLCHAIN_MCP_MAX_SESSIONS_PER_WORKSPACE", 1_000, 1e7, 1),
    },
    authCacheMs: bounded(env, "TOOLCHAIN_AUTH_CACHE_MS", 5_000),
    authNegativeCacheMs: bounded(env, "TOOLCHAIN_AUTH_NEGATIVE_CACHE_MS", 5_000),
    sse: { idleMs: bounded(env, "TOOLCHAIN_STREAM_IDLE_MS", 300_000) },
    metricsToken: env.TOOLCHAIN_METRICS_TOKEN || undefined,
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

export async function startServer(
  cfg: ServeConfig,
  runtimeOpts: Omit<OpenRuntimeOptions, "databaseUrl" | "dataDir" | "schema"> = {},
  log: (line: string) => void = (l) => console.error(l),
): Promise<RunningServer> {
  const opened = await openRuntime({
    ...runtimeOpts,
    databaseUrl: cfg.databaseUrl,
    dataDir: cfg.dataDir,
    schema: cfg.schema,
  });
  const { runtime, db } = opened;
  const access = new PgAccessStore(db);
  let live: Live | undefined;
  try {
    // the configuration is the truth for configured keys: removed ones are revoked, moved ones follow
    const synced = await access.syncConfiguredKeys(cfg.keys);
    if (synced.revoked) log(`revoked ${synced.revoked} configured API key(s) no longer in TOOLCHAIN_API_KEYS`);
    for (const k of cfg.keys) await opened.tables?.ensureWorkspace(k.workspace); // their demo "Tasks" tables
    let devKey: string | undefined;
    // only on the first start of an empty database: a database whose keys were all revoked gets no new key
    if (cfg.devKey && (await access.countKeys({ includeRevoked: true })) === 0) {
      await access.ensureWorkspace("local");
      await opened.tables?.ensureWorkspace("local");
      // the person at this machine owns the dev key: it may remove confirmations where skills allow it
      devKey = (await access.createKey("local", { label: "local development", permissions: ["relax_confirmation"] }))
        .key;
      const file = devKeyFile(cfg.dataDir);
      if (file && db.kind === "embedded") {
        mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
        writeFileSync(file, `${devKey}\n`, { mode: 0o600 });
        chmodSync(file, 0o600);
      }
    }
    live = await openLive({
      store: runtime.store,
      db,
      redisUrl: cfg.redisUrl,
      viewCacheTtlSeconds: cfg.viewCacheTtlSeconds,
    });
    const api = createApp({
      runtime,
      auth: cfg.oidc
        ? withOidc(
            cachedAuthenticator(access, { cacheMs: cfg.authCacheMs, negativeCacheMs: cfg.authNegativeCacheMs }),
            cfg.oidc,
            access,
          )
        : cachedAuthenticator(access, { cacheMs: cfg.authCacheMs, negativeCacheMs: cfg.authNegativeCacheMs }),
      sse: cfg.sse,
      metricsToken: cfg.metricsToken,
      log,
      live,
      execution: cfg.execution,
      tables: opened.tables,
      limits: cfg.limits,
      mcp: cfg.mcp,
      ready: async () => void (await db.pool.query("SELECT 1")),
    });
    const server = createServer(api.app);
    serverTimeouts(server);
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(cfg.port, cfg.host, () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    const url = `http://${cfg.host.includes(":") ? `[${cfg.host}]` : cfg.host}:${port}`;
    const stopWorker = cfg.worker
      ? runtime.startWorker({ pollMs: cfg.workerPollMs, maxActive: cfg.workerMaxActive, log })
      : async () => undefined;

    log(
      `toolchain API on ${url} (${db.kind === "server" ? "Postgres server" : `embedded Postgres in ${cfg.dataDir}`}; live events via ${live.transport}${cfg.redisUrl ? " + Redis view cache" : ""}; ${cfg.worker ? "executing runs here" : "API only: runs are queued for workers"})`,
    );
    log(`run console: ${url}/console (sign in with a workspace API key)`);
    if (devKey) {
      log(`created workspace "local" with API key:\n\n  ${devKey}\n`);
      const file = devKeyFile(cfg.dataDir);
      if (file && db.kind === "embedded")
        log(
          `(saved to ${file}; try: curl -H "Authorization: Bearer $(cat ${path.relative(process.cwd(), file)})" ${url}/api/skills)`,
        );
    } else {
      // never print a key again (it may have been revoked): say where it is and whether it works
      const file = db.kind === "embedded" ? devKeyFile(cfg.dataDir) : undefined;
      const saved = file && existsSync(file) ? readFileSync(file, "utf8").trim() : undefined;
      if (file && saved && (await access.authenticate(saved))) {
        log(
          `local development key in ${file} (curl -H "Authorization: Bearer $(cat ${path.relative(process.cwd(), file)})" ${url}/api/skills)`,
        );
      } else {
        if (saved) log(`the key saved in ${file} has been revoked`);
        if ((await access.countKeys()) === 0)
          log(
            "no active API key: create one with `npx toolchain keys create --workspace <id>` (stop this server first on an embedded database) or set TOOLCHAIN_API_KEYS",
          );
        else log("API keys: `npx toolchain keys create --workspace <id>` creates one; `keys list` lists them");
      }
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
