/**
 * Whether a decision may be recorded, before anything is written: its shape (the kernel's
 * ConfirmInputSchema), storable values, and what the waiting step takes (the round it answers,
 * mark_done only in doubt, skip only for a failed compensation, edited arguments that still match
 * the skill). Pure but for the registry lookup; Runtime.confirm records what passes.
 */
import { z } from "zod";
import { ConfirmInputSchema, type ConfirmInput, type Decision } from "../kernel/decision.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import type { PendingConfirmation } from "../kernel/pending.js";
import { assertStorable } from "../kernel/storable.js";
import type { ToolChainPlan } from "../plan/schema.js";
import type { SkillRegistry } from "../skills/registry.js";
import { checkEditedArguments } from "../skills/edited-arguments.js";

const pretty = (e: z.ZodError) => z.prettifyError(e).replace(/\n/g, "; ");

/** The caller's input, checked, and the decision to record (without `at` and `round`, set on recording). */
export function parseDecision(raw: ConfirmInput): { input: ConfirmInput; decision: Decision } {
  const parsed = ConfirmInputSchema.safeParse(raw);
  if (!parsed.success)
    throw new ToolchainError(ErrorCode.INVALID_DECISION, `invalid decision: ${pretty(parsed.error)}`);
  const d = parsed.data;
  assertStorable(d.stepId, "stepId");
  if (d.arguments !== undefined) assertStorable(d.arguments, "arguments");
  if (d.output !== undefined) assertStorable(d.output, "output");
  if (d.comment !== undefined) assertStorable(d.comment, "comment");
  const decision: Decision = {
    decision: d.decision,
    ...(d.arguments ? { arguments: d.arguments } : {}),
    ...(d.output !== undefined ? { output: d.output } : {}),
    ...(d.comment ? { comment: d.comment } : {}),
  };
  return { input: d, decision };
}

/** Throws unless `d` answers the wait `pending` of step `d.stepId`. */
export function checkDecision(
  runId: string,
  d: ConfirmInput,
  pending: PendingConfirmation,
  plan: ToolChainPlan,
  registry: SkillRegistry,
): void {
  if (d.round !== undefined && d.round !== (pending.round ?? 0)) {
    throw new ToolchainError(
      ErrorCode.CONFIRMATION_NOT_PENDING,
      `step "${d.stepId}" of run ${runId} waits for a decision of round ${pending.round ?? 0}, not round ${d.round}`,
    );
  }
  if (d.decision === "mark_done" && !pending.inDoubt) {
    throw new ToolchainError(
      ErrorCode.INVALID_DECISION,
      `mark_done is only for a step in doubt after a process failure; step "${d.stepId}" waits for a ${pending.kind ?? "confirmation"} decision`,
    );
  }
  if (d.decision === "skip" && pending.kind !== "compensation") {
    throw new ToolchainError(
      ErrorCode.INVALID_DECISION,
      `skip is only for a failed compensation in strict rollback; step "${d.stepId}" waits for a ${pending.kind ?? "confirmation"} decision`,
    );
  }
  if (d.decision === "approve" && d.arguments) checkEditedArguments(d.stepId, d.arguments, pending, plan, registry);
}

/**
 * Recorded, unapplied decisions as a resume value, each carrying its round (the graph applies a
 * decision only to the wait it answers). Per step, the latest round wins: older ones are stale.
 */
export function latestDecisions(
  unapplied: readonly { stepId: string; round: number; decision: Decision }[],
): Record<string, Decision> {
  const out: Record<string, Decision> = {};
  for (const u of unapplied) {
    const prev = out[u.stepId];
    if (!prev || (prev.round ?? 0) < u.round) out[u.stepId] = { ...u.decision, round: u.round };
  }
  return out;
}
