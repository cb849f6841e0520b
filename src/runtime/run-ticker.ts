/**
 * One batched call per tick for every run a process executes (its control poll, its lease
 * renewals), instead of one timer and one statement per run. With 200 runs in flight, per-run
 * timers cost hundreds of statements a second whose answer is almost always "nothing changed".
 *
 * A run is watched from the start of its drive to its end, with a value (its callback). The
 * interval runs only while some run is watched, and one call is out at a time (a slow database
 * is not asked again before it answered). A run watched between two ticks is in the next one.
 */
export class RunTicker<T> {
  private readonly watched = new Map<string, T>();
  private timer: NodeJS.Timeout | undefined;
  private busy = false;

  /** `onTick` gets the runs watched when the tick fired; a rejection is dropped (the next tick calls again). */
  constructor(
    private readonly onTick: (watched: ReadonlyMap<string, T>) => Promise<void>,
    readonly everyMs: number,
  ) {}

  /** Watch `runId` with `value` until the returned function is called. */
  watch(runId: string, value: T): () => void {
    this.watched.set(runId, value);
    this.timer ??= setInterval(() => this.tick(), this.everyMs);
    return () => {
      if (this.watched.get(runId) !== value) return;
      this.watched.delete(runId);
      if (!this.watched.size && this.timer) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    };
  }

  /** The value `runId` is watched with now (undefined once unwatched): answers arrive after the tick. */
  current(runId: string): T | undefined {
    return this.watched.get(runId);
  }

  /** Runs watched now (tests, soak). */
  get size(): number {
    return this.watched.size;
  }

  private tick(): void {
    if (this.busy || !this.watched.size) return;
    this.busy = true;
    this.onTick(new Map(this.watched))
      .catch(() => undefined) // a transient database error: the next tick calls again
      .finally(() => (this.busy = false));
  }
}
