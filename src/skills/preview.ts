/**
 * A skill's preview, computed one way for everyone: the scheduler's confirmation (graphs/scheduler/
 * attempt.ts, before a step waits) and an approver's edited arguments (POST …/steps/:stepId/preview)
 * both call this, so what the dialog shows for edited arguments is what the step would have shown.
 * The arguments must already match the skill's input schema; the result must be storable.
 */
import { toStepError, type StepError } from "../kernel/errors.js";
import { unstorableResult } from "../kernel/storable.js";
import type { Skill, SkillContext } from "./contract.js";

export type PreviewOutcome = { ok: true; preview: unknown } | { ok: false; error: StepError };

export async function computePreview(
  skill: Skill,
  args: unknown,
  ctx: Omit<SkillContext, "attempt" | "traceContext" | "traceHeaders">,
): Promise<PreviewOutcome> {
  try {
    const p = skill.preview ? await skill.preview(args as never, ctx) : null;
    const bad = unstorableResult(p, "preview", skill.name); // a preview is stored with the run
    return bad ? { ok: false, error: { ...bad, effectStarted: false } } : { ok: true, preview: p ?? null };
  } catch (e) {
    return { ok: false, error: toStepError(e) };
  }
}
