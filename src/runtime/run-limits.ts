/**
 * A Runtime's identity for leases and its serial-key / resource coordination (in process by
 * default, shared by every Runtime over the same store, as processes share a database).
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { LimitCoordinator, RunLimits } from "../kernel/limits.js";
import { DEFAULT_WORKSPACE } from "../kernel/workspace.js";
import { MemoryLimits } from "../store/memory-limits.js";
import type { RunStore } from "../store/run-store.js";

/** A process identity for leases: hostname:pid:random. */
export function defaultOwner(): string {
  return `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
}

/** Runtimes sharing a store share in-process limits (like processes sharing a database). */
const memoryLimits = new WeakMap<RunStore, MemoryLimits>();
export function memoryLimitsFor(store: RunStore): MemoryLimits {
  let l = memoryLimits.get(store);
  if (!l) memoryLimits.set(store, (l = new MemoryLimits()));
  return l;
}

export function runLimits(coordinator: LimitCoordinator, store: RunStore): RunLimits {
  const ws = new Map<string, string>();
  return {
    coordinator,
    async workspaceOf(runId) {
      let w = ws.get(runId);
      if (w === undefined) {
        w = (await store.getRow(runId))?.workspaceId ?? DEFAULT_WORKSPACE;
        if (ws.size >= 10_000) ws.clear();
        ws.set(runId, w);
      }
      return w;
    },
  };
}
