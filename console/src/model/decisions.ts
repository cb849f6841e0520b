/** What an approver can decide for each kind of pending decision (pure). */
import type { DecisionValue } from "../../../src/kernel/decision.js";
import type { PendingDecision, PendingKind, RunEvent, RunView, StepView } from "./types.js";

type Actor = NonNullable<StepView["decision"]>["by"] & {};

/** A principal as a person reads it: the display name, else the id. */
export const actorName = (a: Actor): string => a.name ?? a.id;

/** A decision someone made, as the dialog and the inbox announce it. */
export interface DecidedInfo {
  label: string;
  by?: Actor;
  via?: string;
}

const DECIDED_LABEL: Record<string, string> = {
  approve: "Approved",
  reject: "Rejected",
  mark_done: "Marked done",
  skip: "Skipped",
};

/** The decision an event reports for a step, or undefined when the event decides nothing. */
export function decidedBy(e: Pick<RunEvent, "type" | "data">): DecidedInfo | undefined {
  const d = e.data ?? {};
  const by = typeof d.by === "object" && d.by !== null ? (d.by as Actor) : undefined;
  const via = typeof d.via === "string" ? d.via : undefined;
  if (e.type === "step_confirmed")
    return { label: DECIDED_LABEL[String(d.decision)] ?? "Decided", ...(by ? { by } : {}), ...(via ? { via } : {}) };
  if (e.type === "run_cancel_requested")
    return { label: "Run cancelled", ...(by ? { by } : {}), ...(via ? { via } : {}) };
  return undefined;
}

/** What a step's recorded decision says, for a dialog that learns of it from the run view. */
export function decidedFromStep(s: Pick<StepView, "decision"> | undefined): DecidedInfo {
  const d = s?.decision;
  if (!d) return { label: "Decided" };
  return {
    label: DECIDED_LABEL[d.decision] ?? "Decided",
    ...(d.by ? { by: d.by } : {}),
    ...(d.via ? { via: d.via } : {}),
  };
}

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
  /** When the step began waiting (ms since the epoch): its wait event, else the run's last update. */
  since: number;
  pending: PendingDecision;
}

/**
 * Every pending decision of the given runs, longest waiting first. `since(runId, stepId)` is when
 * the step began waiting (from its wait event); deciding one step of a run does not reset another's.
 */
export function collectPending(
  views: readonly RunView[],
  since: (runId: string, stepId: string) => number | undefined = () => undefined,
): PendingItem[] {
  const out: PendingItem[] = [];
  for (const v of views) {
    for (const p of v.pendingConfirmations)
      out.push({
        runId: v.runId,
        runStatus: v.status,
        goal: v.plan.goal ?? v.plan.planId ?? null,
        since: since(v.runId, p.stepId) ?? Date.parse(v.updatedAt),
        pending: p,
      });
  }
  return out.sort(
    (a, b) => a.since - b.since || a.runId.localeCompare(b.runId) || a.pending.stepId.localeCompare(b.pending.stepId),
  );
}
