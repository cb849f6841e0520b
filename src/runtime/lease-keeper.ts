/**
 * The leases of every run this process executes, renewed in ONE statement per beat (the run
 * store's `renewLeases`, answering the runs whose lease this owner still holds), not one timer
 * and one statement per run (src/runtime/run-ticker.ts). A beat comes every `ttlMs / 3`, so a
 * lease is renewed twice before it could expire while each renewal answers within a beat (one is
 * out at a time: a beat that finds the last one unanswered is skipped, not queued).
 *
 * A run the answer leaves out is lost: another process took it over after this one paused past
 * the lease (or an operator released it). Its drive is told and stops. A failed statement tells
 * nobody: the next beat renews again, and expiry protects the other processes meanwhile.
 */
import { RunTicker } from "./run-ticker.js";

export type RenewLeases = (runIds: readonly string[]) => Promise<ReadonlySet<string>>;

export class LeaseKeeper {
  private readonly ticker: RunTicker<() => void>;

  constructor(renew: RenewLeases, ttlMs: number) {
    this.ticker = new RunTicker(
      async (held) => {
        const still = await renew([...held.keys()]);
        for (const [runId, onLost] of held) {
          // only the holding the beat renewed: a drive that ended (or a new one) is not told
          if (!still.has(runId) && this.ticker.current(runId) === onLost) onLost();
        }
      },
      Math.max(50, Math.floor(ttlMs / 3)),
    );
  }

  /** Keep `runId`'s lease (already taken) renewed until the returned function is called. */
  hold(runId: string, onLost: () => void): () => void {
    return this.ticker.watch(runId, onLost);
  }

  /** Runs held now (tests, soak). */
  get size(): number {
    return this.ticker.size;
  }
}
