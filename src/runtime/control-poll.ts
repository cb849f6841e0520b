/**
 * Cancels and decisions recorded by other processes, for the runs this process executes: ONE
 * read every `everyMs` for all of them (the run store's `controlRequests`, which answers only
 * the runs that have something), not one per run. With 200 runs in flight a per-run poll every
 * 200 ms was ~1,000 reads a second, ~15 % of a 20-step chain's statements (bench/profile-inflight.ts),
 * for answers that are almost always "nothing".
 *
 * A run is watched from the start of its drive to its end. The interval runs only while some run
 * is watched, and one read is in flight at a time (a slow database is not asked again before it
 * answered). A run watched between two ticks is read at the next one: within `everyMs`, as before.
 */
import type { ControlRequests } from "../store/run-store.js";

export type ReadControls = (runIds: readonly string[]) => Promise<Map<string, ControlRequests>>;

export class ControlPoll {
  private readonly watched = new Map<string, (req: ControlRequests) => void>();
  private timer: NodeJS.Timeout | undefined;
  private reading = false;

  constructor(
    private readonly read: ReadControls,
    readonly everyMs: number,
  ) {}

  /** `onRequests` gets the run's requests at each tick that finds any; returns the unwatch. */
  watch(runId: string, onRequests: (req: ControlRequests) => void): () => void {
    this.watched.set(runId, onRequests);
    this.timer ??= setInterval(() => this.tick(), this.everyMs);
    return () => {
      if (this.watched.get(runId) !== onRequests) return;
      this.watched.delete(runId);
      if (!this.watched.size && this.timer) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    };
  }

  /** Runs watched now (tests, soak). */
  get size(): number {
    return this.watched.size;
  }

  private tick(): void {
    if (this.reading || !this.watched.size) return;
    this.reading = true;
    this.read([...this.watched.keys()])
      .then(
        (found) => {
          for (const [runId, req] of found) this.watched.get(runId)?.(req);
        },
        () => undefined, // a transient database error: the next tick reads again
      )
      .finally(() => (this.reading = false));
  }
}
