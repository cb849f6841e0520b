/**
 * Durable "this attempt may have started its effect" markers. Claimed right before a
 * non-idempotent side effect; a claim that already exists means an earlier process started
 * that attempt and died before its result was saved.
 */
export interface IntentLog {
  /** true: newly claimed (go ahead); false: claimed before (the attempt is in doubt). */
  claimIntent(runId: string, stepId: string, attempt: number, owner?: string): Promise<boolean>;
  hasIntent(runId: string, stepId: string, attempt: number): Promise<boolean>;
}
