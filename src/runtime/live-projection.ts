/**
 * What an active run looks like between checkpoints. The scheduler node writes state only when it
 * returns, so while it runs the freshest truth is its event stream; this folds those events (the
 * same projection the run store applies) over what was stored before the drive started.
 */
import type { PendingConfirmation } from "../kernel/pending.js";
import type { Decision } from "../kernel/decision.js";
import type { RunEvent } from "../kernel/events.js";
import { runStatusAfter } from "../kernel/projection.js";
import { TERMINAL_RUN, type RunStatus, type StepStatus } from "../kernel/status.js";
import type { WaitingFor } from "../kernel/limits.js";
import { project } from "../store/projection.js";
import type { RunView } from "../kernel/run-view.js";

export class LiveProjection {
  readonly status = new Map<string, StepStatus>();
  readonly pending = new Map<string, PendingConfirmation>();
  /** Steps waiting for a serial key or resource right now. */
  readonly waitingFor = new Map<string, WaitingFor>();
  /** Decisions handed to the live scheduler, for duplicate detection. */
  readonly decided = new Map<string, Decision>();
  /** The run status the events applied so far moved to (src/kernel/projection.ts); undefined: none did. */
  runStatus: RunStatus | undefined;
  /** Events applied so far: part of the view cache's version (src/live/view-cache.ts). */
  applied = 0;

  seed(pending: readonly PendingConfirmation[]): void {
    for (const p of pending) if (!this.status.has(p.stepId)) this.pending.set(p.stepId, p);
  }

  /** A checkpoint view of the run brought up to the events applied (statuses, waits, pending decisions). */
  overlay(view: RunView): RunView {
    for (const s of view.steps) {
      s.status = this.status.get(s.stepId) ?? s.status;
      s.waitingFor = this.waitingFor.get(s.stepId) ?? null;
    }
    view.pendingConfirmations = [...this.pending.values()];
    // an active run: the status its stored events moved to (planning, waiting, ...); before the
    // first of them is stored, what the checkpoint or the run record says (a run planning right
    // now read as running while its `planning_started` waited for the checkpoint writes)
    const live = this.runStatus;
    if (!TERMINAL_RUN.has(view.status) && live && !TERMINAL_RUN.has(live)) view.status = live;
    return view;
  }

  apply(e: RunEvent): void {
    this.applied++;
    if (e.stepId !== undefined) {
      if (e.type === "step_waiting_for_limit") this.waitingFor.set(e.stepId, e.data.waitingFor as WaitingFor);
      else this.waitingFor.delete(e.stepId);
    }
    this.runStatus = runStatusAfter(e, this.runStatus) ?? this.runStatus;
    const p = project([e], [...this.pending.values()]);
    for (const s of p.steps) if (s.status) this.status.set(s.stepId, s.status);
    this.pending.clear();
    for (const x of p.pending) this.pending.set(x.stepId, x);
  }
}
