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
}

const clientOptions = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 1,
  commandTimeout: 1_000,
  retryStrategy: (n: number) => backoff(n),
} as const;

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
    this.pub = new Redis(opts.url, { ...clientOptions, lazyConnect: true });
    this.pub.on("error", () => undefined);
  }

  publish(runId: string, lastSeq: number): void {
    this.pub.publish(this.channel, JSON.stringify({ r: runId, q: lastSeq, o: this.origin })).catch(() => undefined);
  }

  async start(onSignal: SignalListener, onGap: () => void): Promise<void> {
    // a subscriber connection queues while offline and resubscribes after reconnecting
    const sub = new Redis(this.opts.url, { retryStrategy: (n: number) => backoff(n), maxRetriesPerRequest: null });
    this.sub = sub;
    sub.on("error", () => undefined);
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
    await Promise.all([this.pub.connect().catch(() => undefined), sub.subscribe(this.channel)]);
  }

  async close(): Promise<void> {
    await Promise.all([
      this.pub.quit().catch(() => this.pub.disconnect()),
      this.sub?.quit().catch(() => this.sub?.disconnect()),
    ]);
  }
}

export class RedisViewCache implements ViewCache {
  private readonly redis: Redis;
  private readonly ttl: number;

  private lost = false;

  constructor(private readonly opts: RedisLiveOptions) {
    this.redis = new Redis(opts.url, { ...clientOptions, lazyConnect: true });
    this.redis.on("error", () => undefined);
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
    await this.redis.connect();
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
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
