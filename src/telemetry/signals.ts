/**
 * Operational happenings inside the runtime that no run event records (a drive that threw, a lease
 * lost to another process), for whoever counts them in this process (the metrics: src/api/metrics.ts).
 */
export type RuntimeSignal =
  { kind: "drive_failed"; runId: string; final: boolean; code: string } | { kind: "lease_lost"; runId: string };

const listeners = new Set<(s: RuntimeSignal) => void>();

export function onRuntimeSignal(fn: (s: RuntimeSignal) => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

export function emitRuntimeSignal(s: RuntimeSignal): void {
  for (const l of listeners) l(s);
}
