/**
 * The ToolChainPlan contract: what a planner (or a human) writes and the runtime executes.
 * Unknown fields are rejected (`strict`) so a typo never silently changes semantics.
 */
import { z } from "zod";
import { ERROR_CODES } from "../kernel/errors.js";
import { ApprovalPolicySchema } from "../kernel/approval-policy.js";

export const MAX_STEPS = 10_000;
export const MAX_ATTEMPTS = 10;
/** Node's timers hold at most 2^31-1 ms (~24.8 days); a longer delay fires at once. Every duration is bounded by it. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export const StepIdSchema = z
  .string()
  .regex(
    /^[A-Za-z][A-Za-z0-9_-]{0,63}$/,
    "stepId must start with a letter and use letters, digits, '_' or '-' (max 64)",
  );

/** The longest retry backoff: the plan's `initialMs` / `maxMs`, and every computed delay (1 h). */
export const MAX_BACKOFF_MS = 3_600_000;

export const BackoffSchema = z
  .object({
    kind: z.enum(["fixed", "exponential"]),
    initialMs: z.number().int().min(0).max(MAX_BACKOFF_MS),
    maxMs: z.number().int().min(0).max(MAX_BACKOFF_MS).optional(),
    jitter: z.boolean().optional(),
  })
  .strict();

export const RetrySpecSchema = z
  .object({
    maxAttempts: z.number().int().min(1).max(MAX_ATTEMPTS).default(2),
    backoff: BackoffSchema.default({ kind: "exponential", initialMs: 200, maxMs: 5_000, jitter: true }),
    retryOn: z.array(z.enum(ERROR_CODES)).optional(),
  })
  .strict();

export const RollbackSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("none") }).strict(),
  z.object({ kind: z.literal("delete_created_records") }).strict(),
  z
    .object({
      kind: z.literal("skill"),
      skillName: z.string().min(1),
      arguments: z.record(z.string(), z.unknown()).optional(),
    })
    .strict(),
]);

export const FailurePolicySchema = z.enum(["fail_fast", "skip_dependents", "continue"]);
export const RollbackModeSchema = z.enum(["best_effort", "strict"]);

export const FallbackSchema = z.union([
  z.object({ value: z.unknown() }).strict(),
  z
    .object({
      skillName: z.string().min(1),
      arguments: z.record(z.string(), z.unknown()).optional(),
    })
    .strict(),
]);

export const ToolChainStepSchema = z
  .object({
    stepId: StepIdSchema,
    skillName: z.string().min(1).max(128),
    dependsOn: z.array(StepIdSchema).default([]),
    arguments: z.record(z.string(), z.unknown()).default({}),
    saveResultAs: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/)
      .optional(),
    retry: RetrySpecSchema.optional(),
    rollback: RollbackSchema.optional(),
    timeoutMs: z.number().int().positive().max(86_400_000).optional(),
    requireConfirmation: z.boolean().optional(),
    /** Tightens the skill's approval policy (never loosens it: src/kernel/approval-policy.ts). */
    approval: ApprovalPolicySchema.optional(),
    fallback: FallbackSchema.optional(),
    onFailure: FailurePolicySchema.optional(),
    /** strict rollback mode: accept that this side effect cannot be compensated. */
    acceptNoCompensation: z.boolean().optional(),
    description: z.string().max(2_000).optional(),
  })
  .strict();

export const ToolChainPlanSchema = z
  .object({
    planId: z.string().max(128).optional(),
    goal: z.string().max(10_000).optional(),
    steps: z.array(ToolChainStepSchema).min(1),
    maxConcurrency: z.number().int().positive().max(10_000).optional(),
    onFailure: FailurePolicySchema.default("skip_dependents"),
    rollbackMode: RollbackModeSchema.default("best_effort"),
    deadlineMs: z
      .number()
      .int()
      .positive()
      .max(MAX_TIMER_MS, `deadlineMs must be at most ${MAX_TIMER_MS} ms (2^31-1, the longest timer Node can hold)`)
      .optional(),
  })
  .strict();

export type ToolChainPlanInput = z.input<typeof ToolChainPlanSchema>;
export type ToolChainPlan = z.output<typeof ToolChainPlanSchema>;
export type ToolChainStep = z.output<typeof ToolChainStepSchema>;
export type RetrySpec = z.output<typeof RetrySpecSchema>;
export type Backoff = z.output<typeof BackoffSchema>;
export type Rollback = z.output<typeof RollbackSchema>;
export type FailurePolicy = z.output<typeof FailurePolicySchema>;
export type RollbackMode = z.output<typeof RollbackModeSchema>;
export type Fallback = z.output<typeof FallbackSchema>;
