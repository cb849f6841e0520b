/**
 * Views of finished runs kept in process (a finished run's view never changes), bounded by bytes
 * with a per-workspace share (src/live/workspace-lru.ts).
 */
import { WorkspaceLru, type WorkspaceEntry } from "../live/workspace-lru.js";

export interface FinishedViewsOptions {
  /** All views together. @default 32 MiB */
  maxBytes?: number;
  /** One workspace's views together. @default a quarter of maxBytes */
  maxBytesPerWorkspace?: number;
}

export class FinishedViews {
  private readonly lru: WorkspaceLru<WorkspaceEntry>;

  constructor(o: FinishedViewsOptions = {}) {
    this.lru = new WorkspaceLru({
      maxBytes: o.maxBytes ?? 32 * 1024 * 1024,
      maxBytesPerWorkspace: o.maxBytesPerWorkspace,
    });
  }

  get(runId: string): WorkspaceEntry | undefined {
    return this.lru.get(runId);
  }

  set(runId: string, workspaceId: string, body: string): void {
    this.lru.set(runId, { workspaceId, body });
  }

  /** Bytes held now (all views; one workspace's). */
  bytes(workspaceId?: string): number {
    return this.lru.bytes(workspaceId);
  }

  get size(): number {
    return this.lru.size;
  }
}
