/**
 * A step waiting for a human decision, as every surface lists it (`pendingConfirmations`): the
 * graph's approval nodes raise these, the store projects them from events, the API shows them.
 */
import { z } from "zod";
import type { RunState } from "./run-state.js";
import type { SkillVersion } from "./skill-version.js";

/** A skill's version as runs pin it (src/skills/version.ts computes it). */
export const SkillVersionSchema = z.object({
  version: z.string().describe("The skill's declared semver"),
  hash: z.string().describe("Hash of its input/output schemas and confirmation/compensation rules"),
}) satisfies z.ZodType<SkillVersion>;

/**
 * The skill version that computed the preview an approver was shown is not the one that will run
 * (a deploy while the step waited): what this version would run and show, where it differs. The
 * API and the agent tools answer with it as is; src/kernel/version-notice.ts puts it in words.
 */
export const VersionChangeSchema = z.object({
  from: SkillVersionSchema.describe("The version that computed `preview` (what the approver was shown)"),
  to: SkillVersionSchema.describe("The version that will run the step"),
  arguments: z
    .record(z.string(), z.unknown())
    .optional()
    .describe("The arguments as that version runs them (migrated), when they differ"),
  preview: z.unknown().optional().describe("That version's preview of them, when it differs from `preview`"),
  error: z
    .object({ code: z.string(), message: z.string() })
    .optional()
    .describe("They no longer validate (the field named), or the preview failed: approving would fail the step"),
});
export type VersionChange = z.infer<typeof VersionChangeSchema>;

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
  /** Under a policy with `expiresAfterMs`: when the wait expires (the run row holds it; any process's worker applies it). */
  expiresAt?: string;
  /** What happens then. */
  onExpiry?: "reject" | "leave";
  /** Set when the skill's version changed while the step waited (src/runtime/version-changes.ts). */
  versionChanged?: VersionChange;
}

/** A failed compensation in strict rollback, waiting for retry / skip / stop. */
export function compensationPending(
  skillName: string,
  b: { stepId: string; round: number; error: unknown },
): PendingConfirmation {
  return {
    stepId: b.stepId,
    skillName,
    arguments: null,
    preview: {
      compensationFailed: true,
      error: b.error,
      options: {
        approve: "retry the compensation",
        skip: "leave this step undone and continue",
        reject: "stop the rollback",
      },
    },
    round: b.round,
    kind: "compensation",
  };
}

/** What waits for a person in this state: confirmations, in-doubt steps and a blocked strict rollback. */
export function pendingConfirmations(
  state: Pick<RunState, "steps" | "plan"> & Partial<Pick<RunState, "rollbackBlocked">>,
): PendingConfirmation[] {
  const out: PendingConfirmation[] = [];
  for (const s of state.plan.steps) {
    const r = state.steps[s.stepId];
    if (r?.status === "waiting_confirmation") {
      // waiting to run its fallback skill: the decision is about that skill and its arguments
      const fb = !r.inDoubt && r.fallbackOf && s.fallback && "skillName" in s.fallback ? s.fallback : undefined;
      out.push({
        stepId: s.stepId,
        skillName: fb ? fb.skillName : s.skillName,
        arguments: fb ? (r.fallbackInput ?? fb.arguments ?? {}) : (r.input ?? s.arguments),
        preview: r.preview ?? null,
        round: r.waitRound ?? 0,
        ...(r.inDoubt ? { inDoubt: true, kind: "in_doubt" as const } : { kind: "confirmation" as const }),
        ...(fb ? { fallback: true } : {}),
      });
    }
  }
  const b = state.rollbackBlocked;
  if (b) out.push(compensationPending(state.plan.steps.find((s) => s.stepId === b.stepId)!.skillName, b));
  return out;
}
