/**
 * The per-run event log: numbers events 1, 2, 3... and drops re-emissions (same key) that a
 * replaying node produces. The Postgres implementation keeps the same contract.
 */
import type { EmittedEvent, RunEvent } from "../kernel/events.js";

export interface EventLog {
  /** Appends the events not seen before (by key); returns them numbered. */
  append(runId: string, events: readonly EmittedEvent[]): Promise<RunEvent[]>;
  list(runId: string, after?: number): Promise<RunEvent[]>;
}

export class MemoryEventLog implements EventLog {
  private readonly runs = new Map<string, { events: RunEvent[]; keys: Set<string> }>();
  async append(runId: string, events: readonly EmittedEvent[]): Promise<RunEvent[]> {
    let r = this.runs.get(runId);
    if (!r) this.runs.set(runId, (r = { events: [], keys: new Set() }));
    const out: RunEvent[] = [];
    for (const e of events) {
      if (r.keys.has(e.key)) continue;
      r.keys.add(e.key);
      const ev: RunEvent = { ...e, runId, seq: r.events.length + 1 };
      r.events.push(ev);
      out.push(ev);
    }
    return out;
  }
  async list(runId: string, after = 0): Promise<RunEvent[]> {
    return (this.runs.get(runId)?.events ?? []).filter((e) => e.seq > after);
  }
}
