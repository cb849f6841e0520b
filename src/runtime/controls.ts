/**
 * Live, in-process controls of active runs: cancellation signals and the decision inbox that lets
 * a confirmation reach a scheduler that is still busy on other branches (no interrupt raised yet).
 * Decisions taken from the inbox are recorded durably by the scheduler (a pinned task), so the
 * inbox itself may be lossy: a decision that was never consumed is still applied on resume.
 */
import type { Decision } from "../../graphs/state.js";

export interface DecisionInbox {
  /** Offer a decision to a live scheduler of this run; returns false if none is listening. */
  offer(runId: string, stepId: string, d: Decision): boolean;
  /** Called by a scheduler node while it runs. */
  listen(runId: string, cb: (stepId: string, d: Decision) => void): () => void;
  /** Decisions offered while no scheduler was listening (and not yet taken). */
  take(runId: string): Map<string, Decision>;
}

export class RunControls implements DecisionInbox {
  private readonly cancels = new Map<string, AbortController>();
  private readonly listeners = new Map<string, (stepId: string, d: Decision) => void>();
  private readonly parked = new Map<string, Map<string, Decision>>();

  signal(runId: string): AbortSignal {
    let c = this.cancels.get(runId);
    if (!c) this.cancels.set(runId, (c = new AbortController()));
    return c.signal;
  }
  cancel(runId: string, reason: unknown): void {
    let c = this.cancels.get(runId);
    if (!c) this.cancels.set(runId, (c = new AbortController()));
    c.abort(reason);
  }
  /** Forget a run that reached a terminal state. */
  release(runId: string): void {
    this.cancels.delete(runId);
    this.parked.delete(runId);
    this.listeners.delete(runId);
  }

  offer(runId: string, stepId: string, d: Decision): boolean {
    const l = this.listeners.get(runId);
    if (l) {
      l(stepId, d);
      return true;
    }
    let m = this.parked.get(runId);
    if (!m) this.parked.set(runId, (m = new Map()));
    m.set(stepId, d);
    return false;
  }
  listen(runId: string, cb: (stepId: string, d: Decision) => void): () => void {
    this.listeners.set(runId, cb);
    return () => {
      if (this.listeners.get(runId) === cb) this.listeners.delete(runId);
    };
  }
  take(runId: string): Map<string, Decision> {
    const m = this.parked.get(runId) ?? new Map<string, Decision>();
    this.parked.delete(runId);
    return m;
  }
}
