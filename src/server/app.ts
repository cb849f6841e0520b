/**
 * The HTTP surfaces of one server, side by side: the REST API (src/api: thin routes over the
 * RunService, one concern per file), the MCP endpoint (src/mcp) and the console, sharing one
 * RunService, one key check and rate limit, one set of stream slots and one metrics registry.
 * `createApp({ runtime, auth })` → an Express 5 app.
 *
 *   const { app, close } = createApp({ runtime, auth: cachedAuthenticator(accessStore) });
 *   const server = app.listen(8080);
 */
import { incomingTraceContext } from "../telemetry/http.js";
import express, { type Express, type RequestHandler } from "express";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { localLive, type Live } from "../live/index.js";
import { LocalViewCache, noViewCache } from "../live/view-cache.js";
import type { Runtime } from "../runtime/runtime.js";
import { perIpRateLimit, perKeyRateLimit, requireKey, type Authenticator } from "../api/auth.js";
import { describeInternalError, errorHandler, notFound, type InternalErrorInfo } from "../api/errors.js";
import { StreamSlots } from "../api/stream-slots.js";
import { createMetrics, type ApiMetrics } from "../api/metrics.js";
import { opsRouter } from "../api/ops.js";
import { RunService, type Execution } from "../service/run-service.js";
import { runsRouter } from "../api/runs.js";
import { consoleRouter } from "../api/console.js";
import { securityHeaders } from "../api/security.js";
import { skillsRouter } from "../api/skills.js";
import { tablesRouter } from "../api/tables.js";
import type { TableStore } from "../../skills/qtable/store.js";
import type { SseOptions, SseStream } from "../api/sse.js";
import { mcpHttp, principalFromExtra } from "../mcp/http.js";
import { createToolchainMcpServer } from "../mcp/server.js";

export interface McpOptions {
  /** How long a confirmation asked through MCP elicitation waits for the user. @default 300000 */
  elicitationTimeoutMs?: number;
  /** An MCP session without requests for this long is closed (an open GET stream does not keep it). @default 1800000 */
  sessionIdleMs?: number;
  /** Open MCP sessions per process (TOOLCHAIN_MCP_MAX_SESSIONS). @default 10000 */
  maxSessions?: number;
  /** Per API key (TOOLCHAIN_MCP_MAX_SESSIONS_PER_KEY): its oldest idle session is closed for a new one. @default 100 */
  maxSessionsPerKey?: number;
  /** Per workspace (TOOLCHAIN_MCP_MAX_SESSIONS_PER_WORKSPACE). @default 1000 */
  maxSessionsPerWorkspace?: number;
}

export interface AppLimits {
  /** Largest accepted request body. @default 1 MiB */
  bodyBytes?: number;
  /** Per API key, per process; 0 disables. @default 600 */
  requestsPerMinute?: number;
  /** A request that waits for a run answers 202 with the current view after this long. @default 300000 */
  maxWaitMs?: number;
  /** Per client address, before authentication; 0 disables. @default 1200 */
  requestsPerMinutePerIp?: number;
  /** Open event streams per API key and process (429 TOO_MANY_STREAMS above); 0: unlimited. @default 20 */
  streamsPerKey?: number;
  /** Finished runs' views kept in process, in bytes (JSON length). @default 32 MiB */
  finishedViewBytes?: number;
  /** Views of unfinished runs cached in process when there is no Redis view cache (0: none). @default 16 MiB */
  liveViewBytes?: number;
  /** One workspace's share of them. @default a quarter of finishedViewBytes */
  finishedViewBytesPerWorkspace?: number;
  /** One workspace's share of the live views. @default a quarter of liveViewBytes */
  liveViewBytesPerWorkspace?: number;
}

export interface AppOptions {
  runtime: Runtime;
  auth: Authenticator;
  /** Signals, followers and view cache. @default in-process only (see src/live) */
  live?: Live;
  /** inline: runs execute in this process; queue: recorded for worker processes. @default "inline" */
  execution?: Execution;
  /** The QTable store: serves /api/tables (absent: no table routes). */
  tables?: TableStore;
  /** Readiness probe (e.g. `SELECT 1`). @default always ready */
  ready?: () => Promise<void>;
  limits?: AppLimits;
  sse?: SseOptions;
  /** Prometheus metrics at /metrics. @default true */
  metrics?: boolean;
  /** Serve the run console at /console. @default true */
  console?: boolean;
  /** The MCP endpoint at /mcp (false: off). @default {} */
  mcp?: McpOptions | false;
  /** Errors that answered 500 (bugs). @default console.error of describeInternalError (Postgres errors by code and run id, never their values) */
  onInternalError?: (e: unknown, info: InternalErrorInfo) => void;
  /** /metrics requires this bearer token when set (TOOLCHAIN_METRICS_TOKEN). */
  metricsToken?: string;
  /** Operational log lines (readiness failures). @default console.error */
  log?: (line: string) => void;
}

export interface ApiApp {
  app: Express;
  live: Live;
  metrics?: ApiMetrics;
  service: RunService;
  /** Ends open event streams and stops followers (call before closing the HTTP server). */
  close(): Promise<void>;
}

/** API answers hold run context and outputs: no shared or browser cache may keep them. */
const noStore: RequestHandler = (_req, res, next) => {
  res.setHeader("Cache-Control", "no-store");
  next();
};

/** A request body must be JSON (or absent). */
const jsonOnly: RequestHandler = (req, _res, next) => {
  const hasBody =
    req.headers["transfer-encoding"] !== undefined ||
    (req.headers["content-length"] !== undefined && req.headers["content-length"] !== "0");
  if (hasBody && !req.is(["application/json", "application/*+json"])) {
    throw new ToolchainError(
      ErrorCode.UNSUPPORTED_MEDIA_TYPE,
      `request body must be application/json, got ${req.get("content-type") ?? "no content type"}`,
    );
  }
  next();
};

export function createApp(opts: AppOptions): ApiApp {
  const { runtime } = opts;
  const live = opts.live ?? localLive(runtime.store);
  const ownsLive = !opts.live;
  const streams = new Set<SseStream>();
  const slots = new StreamSlots(opts.limits?.streamsPerKey ?? 20);
  // MCP GET streams count with the event streams (slots and metrics); `mcp` is set below
  const metrics =
    opts.metrics === false
      ? undefined
      : createMetrics(runtime.store, { openStreams: () => streams.size + (mcp ? mcp.openStreams() : 0) });
  const limits = opts.limits ?? {};
  const service = new RunService({
    runtime,
    feeds: live.feeds,
    // without Redis, views of unfinished runs are cached in process, tagged with the run's version
    cache:
      live.cache !== noViewCache || limits.liveViewBytes === 0
        ? live.cache
        : new LocalViewCache((id) => runtime.viewVersion(id), {
            maxBytes: limits.liveViewBytes,
            maxBytesPerWorkspace: limits.liveViewBytesPerWorkspace,
          }),
    execution: opts.execution ?? "inline",
    maxWaitMs: limits.maxWaitMs ?? 300_000,
    finishedViews: { maxBytes: limits.finishedViewBytes, maxBytesPerWorkspace: limits.finishedViewBytesPerWorkspace },
  });

  const app = express();
  app.disable("x-powered-by");
  app.set("etag", false);
  // over-limit traffic from one address is refused first: before helmet, metrics, the routers and
  // the body parser (its body is never read), so a flood of bogus keys costs as little as it can
  app.use(["/api", "/mcp"], perIpRateLimit(limits.requestsPerMinutePerIp ?? 1_200));
  app.use(securityHeaders());
  // the caller's W3C trace context is the active context while its request is handled (tracing on)
  app.use(incomingTraceContext);
  if (metrics) {
    app.use((req, res, next) => {
      const end = metrics.httpDuration.startTimer();
      res.on("finish", () => {
        if (String(res.getHeader("content-type") ?? "").startsWith("text/event-stream")) return;
        end({
          method: req.method,
          route: (req.route?.path as string | undefined) ?? "unmatched",
          status: String(res.statusCode),
        });
      });
      next();
    });
  }
  if (opts.console !== false) app.use(consoleRouter());
  app.use(
    opsRouter({
      ready: opts.ready ?? (async () => undefined),
      metrics,
      metricsToken: opts.metricsToken,
      log: opts.log,
    }),
  );
  // one budget per key across /api and /mcp (unauthenticated floods were limited per address first)
  const keyed = [
    noStore,
    requireKey(opts.auth),
    perKeyRateLimit(limits.requestsPerMinute ?? 600),
    jsonOnly,
    express.json({ limit: limits.bodyBytes ?? 1_048_576, type: ["application/json", "application/*+json"] }),
  ];
  app.use("/api", ...keyed);
  app.use(runsRouter({ service, feeds: live.feeds, decisions: live.decisions, sse: opts.sse ?? {}, streams, slots }));
  app.use(skillsRouter(runtime));
  const mcpOpts = opts.mcp === false ? undefined : (opts.mcp ?? {});
  const mcp =
    mcpOpts &&
    mcpHttp({
      createServer: () =>
        createToolchainMcpServer({
          service,
          feeds: live.feeds,
          principal: principalFromExtra,
          elicitationTimeoutMs: mcpOpts.elicitationTimeoutMs,
        }),
      sessionIdleMs: mcpOpts.sessionIdleMs,
      maxSessions: mcpOpts.maxSessions,
      maxSessionsPerKey: mcpOpts.maxSessionsPerKey,
      maxSessionsPerWorkspace: mcpOpts.maxSessionsPerWorkspace,
      streamSlots: slots,
    });
  if (mcp) {
    app.use("/mcp", ...keyed);
    app.use(mcp.router);
  }
  if (opts.tables) app.use(tablesRouter(opts.tables));
  app.use(notFound);
  app.use(errorHandler(opts.onInternalError ?? ((e, info) => console.error(describeInternalError(e, info)))));

  return {
    app,
    live,
    metrics,
    service,
    async close() {
      for (const s of [...streams]) s.end();
      await mcp?.close();
      metrics?.close();
      if (ownsLive) await live.close();
    },
  };
}

/**
 * HTTP server timeouts for the app: idle keep-alive connections are kept longer than clients keep
 * them (undici: 4 s, load balancers: 60 s), so a client never reuses a socket the server is closing
 * at that moment (the request would fail with ECONNRESET, seen under load with Node's 5 s default).
 */
export function serverTimeouts(server: import("node:http").Server): void {
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
}
