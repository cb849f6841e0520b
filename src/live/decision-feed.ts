/**
 * One live stream of a workspace's decision and wait events (waits beginning, decisions, votes,
 * cancels), however many of its runs wait: the inbox follows every row over one connection, where
 * a stream per run would exhaust a browser's ~6 connections per origin.
 *
 * Fed by the same change signals as the run feeds (in-process, Redis pub/sub or LISTEN/NOTIFY):
 * a hint "run R is at seq N" for a run of a followed workspace reads R's events after the cursor
 * this process keeps for it. A run first hinted after the workspace's follow began is read from a
 * few events before the hint (one commit's worth), keeping those from after the follow began, so
 * an old run's history is never replayed and a long log is never read whole.
 */
import type { RunEvent } from "../kernel/events.js";
import type { RunStore } from "../store/run-store.js";
import type { RunSignals } from "./signals.js";

/** What the inbox reacts to: a wait begins, a step is decided or voted on or starts, a run is cancelled. */
export const DECISION_EVENT_TYPES: ReadonlySet<string> = new Set([
  "step_waiting_confirmation",
  "rollback_waiting_decision",
  "approval_given",
  "step_confirmed",
  "step_started",
  "run_cancel_requested",
  "run_waiting_confirmation",
]);

/** How far before a first hint a new run is read: more than one commit appends. */
const FIRST_READ_BACK = 16;
/** Runs whose workspace this process remembers (a run never changes workspace). */
const MAX_KNOWN_RUNS = 10_000;
/** Event times come from other processes' clocks (a wait replayed from just before a follow began costs a reload, nothing more). */
const CLOCK_SKEW_MS = 1_000;

type Listener = (e: RunEvent) => void;

interface Followed {
  listeners: Set<Listener>;
  since: number;
  cursors: Map<string, number>;
  reading: Map<string, Promise<void>>;
  again: Set<string>;
}

export class DecisionFeeds {
  private readonly workspaces = new Map<string, Followed>();
  private readonly workspaceOf = new Map<string, string>();
  private readonly unsubscribe: () => void;

  constructor(
    private readonly store: Pick<RunStore, "list" | "getRow">,
    signals: RunSignals,
  ) {
    this.unsubscribe = signals.subscribe(
      (runId, seq) => void this.hint(runId, seq),
      // hints may have been lost: re-read every run a follower has seen
      () => {
        for (const f of this.workspaces.values()) for (const runId of f.cursors.keys()) void this.read(f, runId, 0);
      },
    );
  }

  /** Calls `onEvent` for each decision or wait event of the workspace's runs from now on, until the returned function is called. */
  listen(workspaceId: string, onEvent: Listener): () => void {
    let f = this.workspaces.get(workspaceId);
    if (!f) {
      f = { listeners: new Set(), since: Date.now(), cursors: new Map(), reading: new Map(), again: new Set() };
      this.workspaces.set(workspaceId, f);
    }
    const followed = f;
    followed.listeners.add(onEvent);
    return () => {
      followed.listeners.delete(onEvent);
      if (!followed.listeners.size && this.workspaces.get(workspaceId) === followed)
        this.workspaces.delete(workspaceId);
    };
  }

  /** Workspaces followed in this process (metrics, tests). */
  get size(): number {
    return this.workspaces.size;
  }

  private async hint(runId: string, seq: number): Promise<void> {
    if (!this.workspaces.size) return;
    let ws = this.workspaceOf.get(runId);
    if (ws === undefined) {
      const row = await this.store.getRow(runId).catch(() => undefined);
      if (!row) return;
      ws = row.workspaceId;
      if (this.workspaceOf.size >= MAX_KNOWN_RUNS) this.workspaceOf.delete(this.workspaceOf.keys().next().value!);
      this.workspaceOf.set(runId, ws);
    }
    const f = this.workspaces.get(ws);
    if (f) void this.read(f, runId, seq);
  }

  /** Reads the run's events after its cursor; concurrent hints for one run coalesce into one more round. */
  private read(f: Followed, runId: string, seq: number): Promise<void> {
    const busy = f.reading.get(runId);
    if (busy) {
      f.again.add(runId);
      return busy;
    }
    const cursor = f.cursors.get(runId);
    if (cursor !== undefined && seq > 0 && seq <= cursor) return Promise.resolve();
    const first = cursor === undefined;
    const p = (async () => {
      let after = cursor ?? Math.max(0, seq - FIRST_READ_BACK);
      do {
        f.again.delete(runId);
        const events = await this.store.list(runId, after);
        for (const e of events) {
          if (e.seq <= after) continue;
          after = e.seq;
          if (!DECISION_EVENT_TYPES.has(e.type)) continue;
          if (first && Date.parse(e.at) < f.since - CLOCK_SKEW_MS) continue;
          for (const l of f.listeners) l(e);
        }
        f.cursors.set(runId, after);
      } while (f.again.has(runId));
    })()
      .catch(() => undefined) // the database is unreachable: the next hint retries
      .finally(() => f.reading.delete(runId));
    f.reading.set(runId, p);
    return p;
  }

  close(): void {
    this.unsubscribe();
    this.workspaces.clear();
  }
}
