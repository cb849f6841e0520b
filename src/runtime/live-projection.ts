/**
 * What an active run looks like between checkpoints. The scheduler node writes state only when it
 * returns, so while it runs, the freshest truth is its event stream; this folds those events over
 * the last checkpoint. (The Postgres run tables are the durable form of the same projection.)
 */
import type { PendingConfirmation } from "../../graphs/approval-node.js";
import type { Decision } from "../../graphs/state.js";
import { STEP_STATUS_AFTER, type RunEvent } from "../kernel/events.js";
import type { StepStatus } from "../kernel/status.js";

export class LiveProjection {
  readonly status = new Map<string, StepStatus>();
  readonly pending = new Map<string, PendingConfirmation>();
  /** Decisions handed to the live scheduler, for duplicate detection. */
  readonly decided = new Map<string, Decision>();

  seed(pending: PendingConfirmation[]): void {
    for (const p of pending) if (!this.status.has(p.stepId)) this.pending.set(p.stepId, p);
  }

  apply(e: RunEvent): void {
    if (!e.stepId) return;
    const st = STEP_STATUS_AFTER[e.type];
    if (st) this.status.set(e.stepId, st);
    if (e.type === "step_waiting_confirmation") {
      this.pending.set(e.stepId, { stepId: e.stepId, skillName: String(e.data.skillName ?? ""), arguments: e.data.arguments ?? null, preview: e.data.preview ?? null });
    } else if (e.type === "step_confirmed" || e.type === "step_failed" || e.type === "step_cancelled") {
      this.pending.delete(e.stepId);
    }
  }
}
