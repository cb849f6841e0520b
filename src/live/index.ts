/**
 * Live wiring for one process: change signals between processes (Redis when REDIS_URL is set,
 * else Postgres LISTEN/NOTIFY on a server database, else in-process only: an embedded database
 * has one process), the followers of runs, and the run-view cache (Redis only). Worker processes
 * open it too: they publish their runs' changes and invalidate cached views.
 */
import type { Database } from "../store/db.js";
import type { RunStore } from "../store/run-store.js";
import { DecisionFeeds } from "./decision-feed.js";
import { RunFeeds } from "./feeds.js";
import { PgSignalTransport } from "./pg-signals.js";
import { RedisSignalTransport, RedisViewCache } from "./redis.js";
import { RunSignals, type SignalTransport } from "./signals.js";
import { noViewCache, type ViewCache } from "./view-cache.js";

export interface LiveOptions {
  store: RunStore;
  /** For LISTEN/NOTIFY (server mode) and key namespacing. */
  db?: Pick<Database, "shared" | "url" | "schema">;
  redisUrl?: string;
  /** @default 3600 */
  viewCacheTtlSeconds?: number;
  /** Safety-net poll of followed runs. @default 1000 */
  pollMs?: number;
}

export interface Live {
  signals: RunSignals;
  feeds: RunFeeds;
  /** Workspace streams of decision and wait events (the inbox). */
  decisions: DecisionFeeds;
  cache: ViewCache;
  /** "redis" | "postgres" | "local" */
  transport: string;
  close(): Promise<void>;
}

export async function openLive(o: LiveOptions): Promise<Live> {
  const namespace = o.db?.schema ?? "toolchain";
  let transport: SignalTransport | undefined;
  let cache: ViewCache = noViewCache;
  if (o.redisUrl) {
    const redisCache = new RedisViewCache({ url: o.redisUrl, namespace, ttlSeconds: o.viewCacheTtlSeconds });
    await redisCache.connect();
    cache = redisCache;
    transport = new RedisSignalTransport({ url: o.redisUrl, namespace });
  } else if (o.db?.shared && o.db.url) {
    transport = new PgSignalTransport(o.db.url, o.db.schema);
  }
  const live = localLive(o.store, transport, cache, o.pollMs);
  try {
    await live.signals.start();
  } catch (e) {
    await live.close();
    throw e;
  }
  return live;
}

/** Without transport: in-process signals only (one process owns the storage, or tests). */
export function localLive(
  store: RunStore,
  transport?: SignalTransport,
  cache: ViewCache = noViewCache,
  pollMs?: number,
): Live {
  const signals = new RunSignals(store, transport);
  const feeds = new RunFeeds(store, signals, { pollMs });
  const decisions = new DecisionFeeds(store, signals);
  const unwatch = cache === noViewCache ? () => undefined : store.onChange(({ runId }) => void cache.invalidate(runId));
  return {
    signals,
    feeds,
    decisions,
    cache,
    transport: transport?.name ?? "local",
    async close() {
      unwatch();
      feeds.close();
      decisions.close();
      await signals.close();
      await cache.close();
    },
  };
}
