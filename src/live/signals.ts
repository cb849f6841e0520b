/**
 * Live hints "run R has events up to seq N", so SSE followers learn of new events without
 * polling hard. Hints carry no events: followers read them from the run store (the one source
 * of truth, gapless by seq), so a lost or duplicated hint costs latency, never correctness.
 *
 * Sources: the run store's in-process change watcher (every append in this process), plus a
 * transport between processes: Postgres LISTEN/NOTIFY (the store notifies inside the append
 * transaction) or Redis pub/sub (this hub publishes after the append committed).
 */
import type { RunStore } from "../store/run-store.js";

export type SignalListener = (runId: string, lastSeq: number) => void;

export interface SignalTransport {
  readonly name: string;
  /** Tell other processes; a no-op for transports whose messages the store's commit already sends (NOTIFY). */
  publish(runId: string, lastSeq: number): void;
  /** Start receiving. `onGap` after a reconnect: hints may have been lost meanwhile. */
  start(onSignal: SignalListener, onGap: () => void): Promise<void>;
  close(): Promise<void>;
}

export class RunSignals {
  private readonly listeners = new Set<SignalListener>();
  private readonly gapListeners = new Set<() => void>();
  private readonly unwatch: () => void;

  constructor(
    store: Pick<RunStore, "onChange">,
    readonly transport?: SignalTransport,
  ) {
    this.unwatch = store.onChange(({ runId, events }) => {
      const last = events.at(-1);
      if (!last) return;
      this.emit(runId, last.seq);
      transport?.publish(runId, last.seq);
    });
  }

  async start(): Promise<void> {
    await this.transport?.start(
      (runId, seq) => this.emit(runId, seq),
      () => {
        for (const g of this.gapListeners) g();
      },
    );
  }

  subscribe(listener: SignalListener, onGap?: () => void): () => void {
    this.listeners.add(listener);
    if (onGap) this.gapListeners.add(onGap);
    return () => {
      this.listeners.delete(listener);
      if (onGap) this.gapListeners.delete(onGap);
    };
  }

  private emit(runId: string, seq: number): void {
    for (const l of this.listeners) l(runId, seq);
  }

  async close(): Promise<void> {
    this.unwatch();
    this.listeners.clear();
    this.gapListeners.clear();
    await this.transport?.close();
  }
}

/** Reconnect delays for transports: 100 ms doubling to 5 s. */
export function backoff(attempt: number): number {
  return Math.min(5_000, 100 * 2 ** Math.min(attempt, 6));
}
