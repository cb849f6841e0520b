/**
 * An LRU of response bodies bounded by bytes, not by count, with a per-workspace share: one
 * tenant's large bodies evict its own older entries before anyone else's. Sizes are the body's
 * length (the string the cache holds). Used by the finished-view and live-view caches.
 */
import { LRUCache } from "lru-cache";

export interface WorkspaceLruOptions {
  /** All entries together. */
  maxBytes: number;
  /** One workspace's entries together. @default a quarter of maxBytes */
  maxBytesPerWorkspace?: number;
}

export interface WorkspaceEntry {
  workspaceId: string;
  body: string;
}

export class WorkspaceLru<E extends WorkspaceEntry> {
  private readonly cache: LRUCache<string, E>;
  /** workspace -> its keys, oldest first, and their bytes */
  private readonly byWorkspace = new Map<string, { ids: Set<string>; bytes: number }>();
  readonly maxBytes: number;
  readonly maxBytesPerWorkspace: number;

  constructor(o: WorkspaceLruOptions) {
    this.maxBytes = Math.max(1, o.maxBytes);
    this.maxBytesPerWorkspace = Math.max(
      1,
      Math.min(o.maxBytesPerWorkspace ?? Math.floor(this.maxBytes / 4), this.maxBytes),
    );
    this.cache = new LRUCache<string, E>({
      maxSize: this.maxBytes,
      sizeCalculation: (e) => Math.max(1, e.body.length),
      dispose: (e, key) => {
        const w = this.byWorkspace.get(e.workspaceId);
        if (!w || !w.ids.delete(key)) return;
        w.bytes -= Math.max(1, e.body.length);
        if (!w.ids.size) this.byWorkspace.delete(e.workspaceId);
      },
    });
  }

  get(key: string): E | undefined {
    return this.cache.get(key);
  }

  /** Keeps the entry unless it alone is over the workspace's share. */
  set(key: string, entry: E): void {
    const { workspaceId } = entry;
    const size = Math.max(1, entry.body.length);
    this.cache.delete(key);
    if (size > this.maxBytesPerWorkspace) return;
    let w = this.byWorkspace.get(workspaceId);
    // the workspace's oldest entries make room first
    while (w && w.bytes + size > this.maxBytesPerWorkspace) {
      const oldest = w.ids.values().next().value;
      if (oldest === undefined) break;
      this.cache.delete(oldest);
      w = this.byWorkspace.get(workspaceId);
    }
    w = this.byWorkspace.get(workspaceId) ?? { ids: new Set(), bytes: 0 };
    this.byWorkspace.set(workspaceId, w);
    w.ids.add(key);
    w.bytes += size;
    this.cache.set(key, entry);
    // LRUCache refused or evicted it at once: keep the books straight
    if (!this.cache.has(key) && w.ids.delete(key)) {
      w.bytes -= size;
      if (!w.ids.size) this.byWorkspace.delete(workspaceId);
    }
  }

  delete(key: string): void {
    this.cache.delete(key);
  }

  clear(): void {
    this.cache.clear();
  }

  /** Bytes held now (all entries; one workspace's). */
  bytes(workspaceId?: string): number {
    return workspaceId === undefined ? this.cache.calculatedSize : (this.byWorkspace.get(workspaceId)?.bytes ?? 0);
  }

  get size(): number {
    return this.cache.size;
  }
}
