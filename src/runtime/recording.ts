/**
 * Runs whose id `run()` / `runRequest()` gave out before their row's insert committed. A call
 * about one of them waits for that insert (a few ms), so the id works at once on every method
 * instead of answering "not found" while the insert is in flight.
 */
export class Recording {
  private readonly pending = new Map<string, Promise<unknown>>();

  /** The run's row is being inserted by `created`. */
  track(runId: string, created: Promise<unknown>): void {
    this.pending.set(runId, created);
    const done = () => void (this.pending.get(runId) === created && this.pending.delete(runId));
    created.then(done, done);
  }

  /** `f` once the run's row is recorded (at once when this process is not recording it). */
  after<T>(runId: string, f: () => Promise<T>): Promise<T> {
    const p = this.pending.get(runId);
    return p ? p.then(f, f) : f();
  }
}
