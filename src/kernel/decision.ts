/**
 * A human decision on a waiting step, declared once: the graph's state, the REST API, the MCP
 * tools, the agent tools and the console all derive their shapes from these schemas (subsets by
 * `.pick` / `.omit` / `.extend`), so a new field or decision value cannot reach one surface only.
 */
import { z } from "zod";
import { ActorSchema, ApprovalGivenSchema, ViaSchema } from "./actor.js";

/**
 * A confirmation: approve / reject. A step in doubt after a crash: approve = retry it,
 * reject = fail it, mark_done = it happened. A failed compensation in strict rollback:
 * approve = retry it, skip = leave it undone and go on, reject = stop the rollback.
 */
export const DECISION_VALUES = ["approve", "reject", "mark_done", "skip"] as const;
export type DecisionValue = (typeof DECISION_VALUES)[number];
export const DecisionValueSchema = z.enum(DECISION_VALUES);

/** Longest comment kept with a decision (the audit trail). */
export const DECISION_COMMENT_MAX = 4_000;

export const DecisionSchema = z
  .object({
    decision: DecisionValueSchema,
    /** approve only: corrected arguments (validated against the skill's input schema again). */
    arguments: z.record(z.string(), z.unknown()).optional(),
    /** mark_done only: the step's output. */
    output: z.unknown().optional(),
    comment: z.string().max(DECISION_COMMENT_MAX).optional(),
    /** When it was recorded (set by the runtime, not by callers). */
    at: z.string().optional(),
    /**
     * The wait this decision answers (the step's `waitRound`; for a failed strict compensation the
     * block's round; `pendingConfirmations[].round` on the API). Omitted = the wait pending now.
     * A decision never applies to another round of the same step.
     */
    round: z.number().int().min(0).optional(),
    /** Who decided (src/kernel/actor.ts); for a quorum, the principal whose approval completed it. Set by the runtime. */
    by: ActorSchema.optional(),
    /** The surface the decision came through. Set by the runtime. */
    via: ViaSchema.optional(),
    /** A quorum's approvals, in order (each principal once). Set by the runtime. */
    approvals: z.array(ApprovalGivenSchema).max(1_000).optional(),
  })
  .strict();
export type Decision = z.infer<typeof DecisionSchema>;

/** A decision as a caller sends it for one step (`Runtime.confirm`, REST, CLI): no `at`. */
export const ConfirmInputSchema = DecisionSchema.omit({ at: true, by: true, via: true, approvals: true })
  .extend({ stepId: z.string().min(1) })
  .strict();
export type ConfirmInput = z.infer<typeof ConfirmInputSchema>;
