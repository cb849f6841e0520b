/**
 * A cache of GET /runs/:id response bodies. Entries are tagged with the run's version (bumped by
 * whichever process changes the run, after the change commits); an entry whose tag is not the
 * current version is stale. The version is read before the view is computed, so a view computed
 * while the run changes is tagged with the older version and never served after the bump.
 */
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
