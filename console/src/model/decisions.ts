/** What an approver can decide for each kind of pending decision (pure). */
import type { DecisionValue } from "../../../src/kernel/decision.js";
import type { PendingDecision, PendingKind, RunView } from "./types.js";

export interface DecisionAction {
  decision: DecisionValue;
  label: string;
  /** The field this action sends from the dialog's editor. */
  sends?: "arguments" | "output";
  /** Styling hint. */
  tone: "primary" | "danger" | "neutral";
}

export function kindOf(p: PendingDecision): PendingKind {
  return p.kind ?? (p.inDoubt ? "in_doubt" : "confirmation");
}

export const KIND_LABEL: Record<PendingKind, string> = {
  confirmation: "Confirmation",
  in_doubt: "Step in doubt",
  compensation: "Failed compensation",
};

export function actionsFor(kind: PendingKind): DecisionAction[] {
  switch (kind) {
    case "confirmation":
      return [
        { decision: "approve", label: "Approve", sends: "arguments", tone: "primary" },
        { decision: "reject", label: "Reject", tone: "danger" },
      ];
    case "in_doubt":
      return [
        { decision: "approve", label: "Retry the step", tone: "primary" },
        { decision: "mark_done", label: "Mark done", sends: "output", tone: "neutral" },
        { decision: "reject", label: "Reject (fail the step)", tone: "danger" },
      ];
    case "compensation":
      return [
        { decision: "approve", label: "Retry the compensation", tone: "primary" },
        { decision: "skip", label: "Skip (leave it undone)", tone: "neutral" },
        { decision: "reject", label: "Stop the rollback", tone: "danger" },
      ];
  }
}

export interface PendingItem {
  runId: string;
  runStatus: RunView["status"];
  goal: string | null;
  updatedAt: string;
  pending: PendingDecision;
}

/** Every pending decision of the given runs, oldest run activity first (longest waiting on top). */
export function collectPending(views: readonly RunView[]): PendingItem[] {
  const out: PendingItem[] = [];
  for (const v of views) {
    for (const p of v.pendingConfirmations) out.push({ runId: v.runId, runStatus: v.status, goal: v.plan.goal ?? v.plan.planId ?? null, updatedAt: v.updatedAt, pending: p });
  }
  return out.sort((a, b) => a.updatedAt.localeCompare(b.updatedAt) || a.runId.localeCompare(b.runId) || a.pending.stepId.localeCompare(b.pending.stepId));
}
