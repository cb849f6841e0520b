/**
 * Views of finished runs kept in process (a finished run's view never changes), bounded by bytes,
 * not by count, with a per-workspace share: one tenant's large views evict its own older views
 * before anyone else's. Sizes are the JSON body's length (the string the cache holds).
 */
import { LRUCache } from "lru-cache";

export interface FinishedViewsOptions {
  /** All views together. @default 32 MiB */
  maxBytes?: number;
  /** One workspace's views together. @default a quarter of maxBytes */
  maxBytesPerWorkspace?: number;
}

interface Entry {
  workspaceId: string;
  body: string;
}

export class FinishedViews {
  private readonly cache: LRUCache<string, Entry>;
  /** workspace -> its run ids, oldest first, and their bytes */
  private readonly byWorkspace = new Map<string, { ids: Set<string>; bytes: number }>();
  readonly maxBytes: number;
  readonly maxBytesPerWorkspace: number;

  constructor(o: FinishedViewsOptions = {}) {
    this.maxBytes = Math.max(1, o.maxBytes ?? 32 * 1024 * 1024);
    this.maxBytesPerWorkspace = Math.max(1, Math.min(o.maxBytesPerWorkspace ?? Math.floor(this.maxBytes / 4), this.maxBytes));
    this.cache = new LRUCache<string, Entry>({
      maxSize: this.maxBytes,
      sizeCalculation: (e) => Math.max(1, e.body.length),
      dispose: (e, runId) => {
        const w = this.byWorkspace.get(e.workspaceId);
        if (!w || !w.ids.delete(runId)) return;
        w.bytes -= Math.max(1, e.body.length);
        if (!w.ids.size) this.byWorkspace.delete(e.workspaceId);
      },
    });
  }

  get(runId: string): Entry | undefined {
    return this.cache.get(runId);
  }

  /** Keeps the view unless it alone is over the workspace's share. */
  set(runId: string, workspaceId: string, body: string): void {
    const size = Math.max(1, body.length);
    if (size > this.maxBytesPerWorkspace) return;
    this.cache.delete(runId);
    let w = this.byWorkspace.get(workspaceId);
    // the workspace's oldest views make room first
    while (w && w.bytes + size > this.maxBytesPerWorkspace) {
      const oldest = w.ids.values().next().value;
      if (oldest === undefined) break;
      this.cache.delete(oldest);
      w = this.byWorkspace.get(workspaceId);
    }
    w = this.byWorkspace.get(workspaceId) ?? { ids: new Set(), bytes: 0 };
    this.byWorkspace.set(workspaceId, w);
    w.ids.add(runId);
    w.bytes += size;
    this.cache.set(runId, { workspaceId, body });
    // LRUCache refused or evicted it at once: keep the books straight
    if (!this.cache.has(runId) && w.ids.delete(runId)) {
      w.bytes -= size;
      if (!w.ids.size) this.byWorkspace.delete(workspaceId);
    }
  }

  /** Bytes held now (all views; one workspace's). */
  bytes(workspaceId?: string): number {
    return workspaceId === undefined ? this.cache.calculatedSize : this.byWorkspace.get(workspaceId)?.bytes ?? 0;
  }

  get size(): number {
    return this.cache.size;
  }
}
