/**
 * The per-run event log: numbers events 1, 2, 3... and drops re-emissions (same key) that a
 * replaying node produces.
 */
import type { EmittedEvent, RunEvent } from "../kernel/events.js";

export interface EventLog {
  /** Appends the events not seen before (by key); returns them numbered. */
  append(runId: string, events: readonly EmittedEvent[], owner?: string): Promise<RunEvent[]>;
  list(runId: string, after?: number): Promise<RunEvent[]>;
}
