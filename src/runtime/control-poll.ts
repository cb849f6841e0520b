/**
 * Cancels and decisions recorded by other processes, for the runs this process executes: ONE
 * read every `everyMs` for all of them (the run store's `controlRequests`, which answers only
 * the runs that have something), not one per run (src/runtime/run-ticker.ts). With 200 runs in
 * flight a per-run poll every 200 ms was ~1,000 reads a second, ~15 % of a 20-step chain's
 * statements (bench/profile-inflight.ts), for answers that are almost always "nothing".
 * A run watched between two ticks is read at the next one: within `everyMs`, as before.
 */
import type { ControlRequests } from "../store/run-store.js";
import { RunTicker } from "./run-ticker.js";

export type ReadControls = (runIds: readonly string[]) => Promise<Map<string, ControlRequests>>;

type OnRequests = (req: ControlRequests) => void;

export class ControlPoll {
  private readonly ticker: RunTicker<OnRequests>;

  constructor(read: ReadControls, everyMs: number) {
    this.ticker = new RunTicker(async (watched) => {
      const found = await read([...watched.keys()]);
      // told only while still watched: a drive that ended during the read is not told
      for (const [runId, req] of found) this.ticker.current(runId)?.(req);
    }, everyMs);
  }

  /** `onRequests` gets the run's requests at each tick that finds any; returns the unwatch. */
  watch(runId: string, onRequests: OnRequests): () => void {
    return this.ticker.watch(runId, onRequests);
  }

  /** Runs watched now (tests, soak). */
  get size(): number {
    return this.ticker.size;
  }
}
