/**
 * A cache of GET /runs/:id response bodies. Entries are tagged with the run's version (bumped by
 * whichever process changes the run, after the change commits); an entry whose tag is not the
 * current version is stale. The version is read before the view is computed, so a view computed
 * while the run changes is tagged with the older version and never served after the bump.
 */
import { WorkspaceLru } from "./workspace-lru.js";

export type CacheLookup = { hit: { workspaceId: string; body: string } } | { miss: { version: string | null } };

export interface ViewCache {
  lookup(runId: string): Promise<CacheLookup>;
  /** `version` from the miss; null (cache unavailable) stores nothing. */
  store(runId: string, version: string | null, workspaceId: string, body: string): Promise<void>;
  /** The run changed: entries tagged before now are stale. */
  invalidate(runId: string): Promise<void>;
  close(): Promise<void>;
}

/** No cache (no REDIS_URL): every lookup misses and nothing is kept. */
export const noViewCache: ViewCache = {
  lookup: async () => ({ miss: { version: null } }),
  store: async () => undefined,
  invalidate: async () => undefined,
  close: async () => undefined,
};

export interface LocalViewCacheOptions {
  /** All cached bodies together. @default 16 MiB */
  maxBytes?: number;
  /** One workspace's bodies together (one tenant polling many runs cannot evict the others'). @default a quarter of maxBytes */
  maxBytesPerWorkspace?: number;
}

/**
 * The in-process cache (no REDIS_URL): an entry is tagged with the run's version as read from
 * the database (Runtime.viewVersion: the run row's updated_at, moved by the same appends and syncs
 * that bump the Redis version, plus lease owner, status, latest checkpoint and this process's
 * live projection). Every lookup reads that version (one indexed query) instead of rebuilding the
 * view from the checkpoint, so a change committed by any process sharing the database misses at
 * once: nothing to publish, nothing lost when a signal is. Bounded by bytes (LRU), each workspace
 * within its share.
 */
export class LocalViewCache implements ViewCache {
  private readonly entries: WorkspaceLru<{ version: string; workspaceId: string; body: string }>;

  constructor(
    private readonly versionOf: (runId: string) => Promise<string | null>,
    o: LocalViewCacheOptions = {},
  ) {
    this.entries = new WorkspaceLru({
      maxBytes: o.maxBytes ?? 16 * 1024 * 1024,
      maxBytesPerWorkspace: o.maxBytesPerWorkspace,
    });
  }

  async lookup(runId: string): Promise<CacheLookup> {
    // a failed version read is a miss that stores nothing: the uncached path reports the error
    const version = await this.versionOf(runId).catch(() => null);
    const e = version === null ? undefined : this.entries.get(runId);
    if (e && e.version === version) return { hit: { workspaceId: e.workspaceId, body: e.body } };
    return { miss: { version } };
  }

  async store(runId: string, version: string | null, workspaceId: string, body: string): Promise<void> {
    if (version !== null) this.entries.set(runId, { version, workspaceId, body });
  }

  /** A change seen in this process: the entry would miss anyway; free it now. */
  async invalidate(runId: string): Promise<void> {
    this.entries.delete(runId);
  }

  /** Entries held (for growth checks). */
  get size(): number {
    return this.entries.size;
  }

  /** Bytes held now (all entries; one workspace's). */
  bytes(workspaceId?: string): number {
    return this.entries.bytes(workspaceId);
  }

  async close(): Promise<void> {
    this.entries.clear();
  }
}
