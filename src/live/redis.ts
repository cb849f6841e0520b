/**
 * Redis (REDIS_URL): pub/sub transport for live hints and the run-view cache, namespaced by the
 * database schema so deployments (and test schemas) sharing one Redis stay apart. Redis is an
 * accelerator: when it is unreachable, cache operations miss and followers fall back to polling.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { backoff, type SignalListener, type SignalTransport } from "./signals.js";
import type { CacheLookup, ViewCache } from "./view-cache.js";

export interface RedisLiveOptions {
  url: string;
  /** Key namespace (the database schema). */
  namespace: string;
  /** Run-view cache TTL. @default 3600 */
  ttlSeconds?: number;
  /** How long a start waits for Redis before it fails naming REDIS_URL. @default REDIS_START_TIMEOUT_MS */
  startTimeoutMs?: number;
}

const clientOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  commandTimeout: 1_000,
  retryStrategy: (n: number) => backoff(n),
} as const;

/** How long a start waits for Redis before it fails with REDIS_URL named. */
export const REDIS_START_TIMEOUT_MS = 10_000;

/** The URL as it may be shown: without its password. */
export function shownRedisUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "(not a URL)";
  }
}

/** The start's error: what was configured and what the connection said, never the password. */
class RedisUnreachable extends Error {
  constructor(url: string, reason: string | undefined) {
    super(
      `REDIS_URL ${shownRedisUrl(url)}: Redis is not reachable${reason ? ` (${reason})` : ""}; ` +
        "start it, fix REDIS_URL, or unset it (live events then travel over Postgres LISTEN/NOTIFY)",
    );
  }
}

/**
 * Every connection's errors are kept (its last code, for the start's message) rather than thrown:
 * an 'error' without a listener would crash the process, and a Redis going away is not fatal.
 */
const errors = new WeakMap<Redis, string>();
const lastError = (r: Redis) => errors.get(r);
function trackErrors(r: Redis): Redis {
  r.on("error", (e: Error) => errors.set(r, (e as { code?: string }).code ?? e.message));
  return r;
}

/** ioredis rejects a lazy connect with "Connection is closed.": say which URL and why. */
async function connectOrExplain(r: Redis, o: RedisLiveOptions): Promise<void> {
  try {
    await withinStart(r.connect(), o, () => lastError(r));
  } catch (e) {
    r.disconnect();
    throw e instanceof RedisUnreachable ? e : new RedisUnreachable(o.url, lastError(r));
  }
}

async function withinStart<T>(p: Promise<T>, o: RedisLiveOptions, reason: () => string | undefined): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    const ms = o.startTimeoutMs ?? REDIS_START_TIMEOUT_MS;
    timer = setTimeout(() => reject(new RedisUnreachable(o.url, reason() ?? `no answer in ${ms} ms`)), ms);
    timer.unref();
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** QUIT when connected; a connection still trying (Redis unreachable) would queue it forever. */
async function leave(r: Redis): Promise<void> {
  if (r.status !== "ready") return r.disconnect();
  await r.quit().catch(() => r.disconnect());
}

export class RedisSignalTransport implements SignalTransport {
  readonly name = "redis";
  private readonly origin = randomUUID();
  private readonly channel: string;
  private readonly pub: Redis;
  private sub: Redis | undefined;

  constructor(private readonly opts: RedisLiveOptions) {
    this.channel = `toolchain:${opts.namespace}:events`;
    // connected in start(): a publisher without an offline queue drops what it is given before
    // it is ready, so a change committed right after start() would signal nobody
    this.pub = trackErrors(new Redis(opts.url, { ...clientOptions, lazyConnect: true }));
  }

  publish(runId: string, lastSeq: number): void {
    this.pub.publish(this.channel, JSON.stringify({ r: runId, q: lastSeq, o: this.origin })).catch(() => undefined);
  }

  async start(onSignal: SignalListener, onGap: () => void): Promise<void> {
    // a subscriber connection queues while offline and resubscribes after reconnecting
    const sub = trackErrors(
      new Redis(this.opts.url, { retryStrategy: (n: number) => backoff(n), maxRetriesPerRequest: null }),
    );
    this.sub = sub;
    sub.on("message", (channel: string, message: string) => {
      if (channel !== this.channel) return;
      try {
        const m = JSON.parse(message) as { r: string; q: number; o: string };
        if (m.o !== this.origin) onSignal(m.r, m.q);
      } catch {
        // not ours
      }
    });
    let ready = 0;
    sub.on("ready", () => {
      if (ready++ > 0) onGap();
    });
    // an unreachable Redis at start leaves the publisher reconnecting on its own (hints are
    // lossy by design: followers also poll), so its failure does not fail the start
    // the subscriber queues its subscribe while offline: bounded, so a start never waits forever
    await Promise.all([
      this.pub.connect().catch(() => undefined),
      withinStart(sub.subscribe(this.channel), this.opts, () => lastError(sub)),
    ]);
  }

  async close(): Promise<void> {
    await Promise.all([leave(this.pub), this.sub && leave(this.sub)]);
  }
}

export class RedisViewCache implements ViewCache {
  private readonly redis: Redis;
  private readonly ttl: number;

  private lost = false;

  constructor(private readonly opts: RedisLiveOptions) {
    this.redis = trackErrors(new Redis(opts.url, { ...clientOptions, lazyConnect: true }));
    // an invalidation may have been lost while Redis was unreachable: drop every entry then
    this.redis.on("ready", () => {
      if (this.lost)
        void this.purge().then(
          () => (this.lost = false),
          () => undefined,
        );
    });
    this.ttl = opts.ttlSeconds ?? 3_600;
  }

  /** Connect (fails when Redis is unreachable at start: a configuration error worth surfacing). */
  async connect(): Promise<void> {
    await connectOrExplain(this.redis, this.opts);
  }

  private async purge(): Promise<void> {
    let cursor = "0";
    do {
      const [next, keys] = await this.redis.scan(
        cursor,
        "MATCH",
        `toolchain:${this.opts.namespace}:view:*`,
        "COUNT",
        500,
      );
      if (keys.length) await this.redis.del(...keys);
      cursor = next;
    } while (cursor !== "0");
  }

  private keys(runId: string) {
    return {
      view: `toolchain:${this.opts.namespace}:view:${runId}`,
      ver: `toolchain:${this.opts.namespace}:ver:${runId}`,
    };
  }

  async lookup(runId: string): Promise<CacheLookup> {
    const k = this.keys(runId);
    try {
      const [entry, ver] = await this.redis.mget(k.view, k.ver);
      const version = ver ?? "0";
      if (entry) {
        // "<version>\n<workspaceId>\n<body>"
        const a = entry.indexOf("\n");
        const b = entry.indexOf("\n", a + 1);
        if (a > 0 && b > a && entry.slice(0, a) === version)
          return { hit: { workspaceId: entry.slice(a + 1, b), body: entry.slice(b + 1) } };
      }
      return { miss: { version } };
    } catch {
      return { miss: { version: null } };
    }
  }

  async store(runId: string, version: string | null, workspaceId: string, body: string): Promise<void> {
    if (version === null) return;
    await this.redis
      .set(this.keys(runId).view, `${version}\n${workspaceId}\n${body}`, "EX", this.ttl)
      .catch(() => undefined);
  }

  async invalidate(runId: string): Promise<void> {
    const k = this.keys(runId);
    // the version outlives every entry tagged before it (2 x TTL, refreshed on each change)
    await this.redis
      .multi()
      .incr(k.ver)
      .expire(k.ver, this.ttl * 2)
      .exec()
      .catch(() => {
        this.lost = true;
      });
  }

  async close(): Promise<void> {
    await leave(this.redis);
  }
}
