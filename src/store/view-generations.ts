/**
 * In-process version numbers of runs' views, for a database only this process writes (embedded
 * Postgres): every write of a run's row, of its events, of its lease or of its checkpoint bumps
 * the run's number after it commits. The numbers come from one counter that only grows, so a run
 * whose number was evicted gets a number no cached view was ever tagged with (a miss, never a
 * stale hit). Bounded by entries.
 */
import { LRUCache } from "lru-cache";

export class ViewGenerations {
  private counter = 0;
  private readonly gens = new LRUCache<string, number>({ max: 100_000 });

  /** The run's current number (a fresh one if it has none). */
  current(runId: string): number {
    let g = this.gens.get(runId);
    if (g === undefined) this.gens.set(runId, (g = ++this.counter));
    return g;
  }

  /** Call after a change to the run committed. */
  bump(runId: string): void {
    this.gens.set(runId, ++this.counter);
  }

  /** Runs tracked (for growth checks). */
  get size(): number {
    return this.gens.size;
  }
}
