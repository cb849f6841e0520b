/**
 * A step waiting for a human decision, as every surface lists it (`pendingConfirmations`): the
 * graph's approval nodes raise these, the store projects them from events, the API shows them.
 */

export type PendingKind = "confirmation" | "in_doubt" | "compensation";

export interface PendingConfirmation {
  stepId: string;
  skillName: string;
  arguments: unknown;
  preview: unknown;
  /** Which wait of this step (0: before its first attempt; n: in doubt after attempt n). */
  round?: number;
  /** The step was running when its process died and the runtime cannot tell if its effect happened. */
  inDoubt?: boolean;
  /** What is being decided. @default "confirmation" */
  kind?: PendingKind;
  /** The step's own skill failed: the decision is about running its fallback skill (`skillName`). */
  fallback?: boolean;
}

/** A failed compensation in strict rollback, waiting for retry / skip / stop. */
export function compensationPending(skillName: string, b: { stepId: string; round: number; error: unknown }): PendingConfirmation {
  return {
    stepId: b.stepId,
    skillName,
    arguments: null,
    preview: { compensationFailed: true, error: b.error, options: { approve: "retry the compensation", skip: "leave this step undone and continue", reject: "stop the rollback" } },
    round: b.round,
    kind: "compensation",
  };
}
