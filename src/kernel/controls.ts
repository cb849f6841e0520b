/**
 * Live, in-process controls of the runs this process is executing now: a cancellation signal and
 * the decision inbox that lets a confirmation reach a scheduler that is still busy on other
 * branches (no interrupt raised yet).
 *
 * Everything here lives exactly as long as one drive (the driver in src/runtime opens it and closes
 * it). Cancels and decisions are durable requests in the run store; these are only the fast path
 * to a drive that is executing here, so a process that is not executing a run keeps nothing for
 * it: no stale abort can turn a later, unrelated drive of that run into a cancellation, and
 * nothing grows with runs that were left waiting or finished elsewhere.
 * Decisions taken from the inbox are recorded durably by the scheduler (a pinned task), so the
 * inbox may be lossy: a decision that was never consumed is still applied on resume.
 */
import type { Context } from "@opentelemetry/api";
import type { Decision } from "./decision.js";
import type { EmittedEvent } from "./events.js";

export interface DecisionInbox {
  /** Offer a decision to the drive of this run in this process; returns false if there is none. */
  offer(runId: string, stepId: string, d: Decision): boolean;
  /** Called by a scheduler node while it runs. */
  listen(runId: string, cb: (stepId: string, d: Decision) => void): () => void;
  /** Decisions offered while no scheduler was listening (and not yet taken). */
  take(runId: string): Map<string, Decision>;
}

interface Live {
  cancel: AbortController;
  listener?: (stepId: string, d: Decision) => void;
  parked: Map<string, Decision>;
  /** The drive's span context (tracing on): what the run's nodes and skills trace under. */
  trace?: Context;
  /** Resolves once the events with these keys are in the run's event log (the driver's). */
  stored?: (keys: string[]) => Promise<void>;
  /** Where the run's nodes hand their events to the drive (graphs/emit.ts). */
  sink?: (ev: EmittedEvent) => void;
}

/** Never aborted: the signal of a graph invoked without a drive (LangGraph server, Studio). */
const NEVER = new AbortController().signal;

export class RunControls implements DecisionInbox {
  private readonly live = new Map<string, Live>();

  /** A drive of `runId` starts in this process (the driver calls it; one drive per run and process). */
  open(runId: string): void {
    this.live.set(runId, { cancel: new AbortController(), parked: new Map() });
  }
  /** The drive's trace context, once its span started (src/telemetry/run-spans.ts). */
  setTraceContext(runId: string, ctx: Context | undefined): void {
    const l = this.live.get(runId);
    if (l) l.trace = ctx;
  }
  /** The trace context of the drive of `runId` here; undefined: none (tracing off, a bare graph: the active context holds). */
  traceContext(runId: string): Context | undefined {
    return this.live.get(runId)?.trace;
  }
  /** How the drive tells when events are stored (src/runtime/driver.ts). */
  setEventLog(runId: string, stored: (keys: string[]) => Promise<void>): void {
    const l = this.live.get(runId);
    if (l) l.stored = stored;
  }
  /**
   * The drive's event sink: the run's nodes hand it their events directly (graphs/emit.ts) instead
   * of through LangGraph's custom stream, which a graph run without a drive (LangGraph server,
   * Studio) still uses.
   */
  setEventSink(runId: string, sink: (ev: EmittedEvent) => void): void {
    const l = this.live.get(runId);
    if (l) l.sink = sink;
  }
  eventSink(runId: string): ((ev: EmittedEvent) => void) | undefined {
    return this.live.get(runId)?.sink;
  }
  /**
   * Resolves once the events with these keys are stored by the drive of `runId` here (at once
   * without one: a bare graph has no event log). graphs/emit.ts: a node's events before its writes.
   */
  eventsStored(runId: string, keys: string[]): Promise<void> {
    const stored = this.live.get(runId)?.stored;
    return stored && keys.length ? stored(keys) : Promise.resolve();
  }
  /** The drive ended: forget everything about the run here. */
  close(runId: string): void {
    this.live.delete(runId);
  }
  /** Runs with an open drive (for tests of growth). */
  size(): number {
    return this.live.size;
  }

  signal(runId: string): AbortSignal {
    return this.live.get(runId)?.cancel.signal ?? NEVER;
  }
  /** Abort the drive of `runId` in this process; false when none runs here. */
  cancel(runId: string, reason: unknown): boolean {
    const l = this.live.get(runId);
    if (!l) return false;
    if (!l.cancel.signal.aborted) l.cancel.abort(reason);
    return true;
  }
  offer(runId: string, stepId: string, d: Decision): boolean {
    const l = this.live.get(runId);
    if (!l) return false;
    if (l.listener) {
      l.listener(stepId, d);
      return true;
    }
    l.parked.set(stepId, d);
    return true;
  }
  listen(runId: string, cb: (stepId: string, d: Decision) => void): () => void {
    const l = this.live.get(runId);
    if (!l) return () => undefined;
    l.listener = cb;
    return () => {
      if (l.listener === cb) l.listener = undefined;
    };
  }
  take(runId: string): Map<string, Decision> {
    const l = this.live.get(runId);
    if (!l) return new Map();
    const m = l.parked;
    l.parked = new Map();
    return m;
  }
}
