/**
 * An approver's edited arguments, previewed before they approve: checked exactly as the decision
 * would be (checkDecision: the round it answers, the skill's input schema), then the skill's own
 * preview through the scheduler's code (src/skills/preview.ts). Nothing is recorded.
 */
import { ErrorCode, ToolchainError, type StepError } from "../kernel/errors.js";
import { checkDecision } from "../runtime/admit-decision.js";
import type { Runtime } from "../runtime/runtime.js";
import { computePreview } from "../skills/preview.js";
import type { RunRow } from "../store/run-store.js";

/** A preview runs skill code that reads (a table, a provider): bounded like a request. */
const PREVIEW_TIMEOUT_MS = 30_000;

export type EditedPreview =
  | { stepId: string; round: number; skillName: string; ok: true; preview: unknown }
  | { stepId: string; round: number; skillName: string; ok: false; error: StepError };

export async function previewEdited(
  runtime: Runtime,
  row: RunRow,
  stepId: string,
  body: { arguments: Record<string, unknown>; round?: number },
): Promise<EditedPreview> {
  const pending = row.pendingConfirmations.find((c) => c.stepId === stepId);
  if (!pending || (pending.kind ?? "confirmation") !== "confirmation" || pending.inDoubt)
    throw new ToolchainError(
      ErrorCode.CONFIRMATION_NOT_PENDING,
      `step "${stepId}" of run ${row.runId} does not wait for a confirmation`,
    );
  // the same checks as the decision itself: a preview answers what approving would do
  checkDecision(
    row.runId,
    { stepId, decision: "approve", arguments: body.arguments, round: body.round },
    pending,
    row.plan,
    runtime.registry,
  );
  const step = row.plan.steps.find((s) => s.stepId === stepId)!;
  const skill = runtime.registry.get(pending.skillName) ?? runtime.registry.get(step.skillName)!;
  const args = skill.input.parse(body.arguments);
  const round = pending.round ?? 0;
  const res = await computePreview(skill, args, {
    runId: row.runId,
    stepId,
    idempotencyKey: pending.fallback ? `${row.runId}:${stepId}:fallback` : `${row.runId}:${stepId}`,
    signal: AbortSignal.timeout(PREVIEW_TIMEOUT_MS),
    logger: runtime.env.logger(row.runId, stepId),
    context: row.context,
    workspaceId: row.workspaceId,
  });
  return res.ok
    ? { stepId, round, skillName: skill.name, ok: true, preview: res.preview }
    : { stepId, round, skillName: skill.name, ok: false, error: res.error };
}
