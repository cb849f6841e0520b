/**
 * The model never decides execution semantics: what a model-written plan proposes for retries,
 * timeouts, rollback and confirmation is clamped to what each skill's metadata and the
 * configuration allow. Pure; every change is reported as a warning. Runs on the raw plan (before
 * validation), so it tolerates any shape and only touches steps naming a registered skill.
 */
import { hasSideEffects, type Skill } from "../skills/contract.js";
/** The caps a clamp applies (the planner configuration carries them). */
export interface ClampLimits {
  maxAttempts: number;
  maxStepTimeoutMs: number;
}

/** Every warning a plan may carry: one list, the API schema derives from it. */
export const PLAN_WARNING_CODES = [
  "confirmation_required",
  "retry_not_allowed",
  "retry_capped",
  "timeout_capped",
  "rollback_ignored",
  "accept_no_compensation_ignored",
  "repaired",
  "no_target_table",
  "fallback_confirmation",
  /** the fallback planner left out a part of the request it cannot do */
  "request_part_dropped",
] as const;
export type PlanWarningCode = (typeof PLAN_WARNING_CODES)[number];

export interface PlanWarning {
  code: PlanWarningCode;
  stepId?: string;
  message: string;
}

type Limits = ClampLimits;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A copy of `plan` clamped to the skills' metadata, and one warning per change. */
export function clampPlan(
  plan: unknown,
  skillOf: (name: string) => Skill | undefined,
  limits: Limits,
): { plan: unknown; warnings: PlanWarning[] } {
  if (!isObject(plan) || !Array.isArray(plan.steps)) return { plan, warnings: [] };
  const warnings: PlanWarning[] = [];
  const steps = plan.steps.map((raw): unknown => {
    if (!isObject(raw) || typeof raw.skillName !== "string") return raw;
    const skill = skillOf(raw.skillName);
    if (!skill) return raw;
    const step: Record<string, unknown> = { ...raw };
    const stepId = typeof step.stepId === "string" ? step.stepId : undefined;
    const warn = (code: PlanWarningCode, message: string) =>
      warnings.push({ code, ...(stepId ? { stepId } : {}), message: `step "${stepId ?? "?"}": ${message}` });

    if (step.requireConfirmation === false && skill.requiresConfirmation) {
      delete step.requireConfirmation;
      warn(
        "confirmation_required",
        `requireConfirmation: false ignored: ${skill.name} requires confirmation${typeof skill.requiresConfirmation === "function" ? " for some arguments" : ""}`,
      );
    }

    // a fallback skill is an execution like any other: it asks when its skill asks (the runtime
    // enforces it wherever the skill runs); say so, so nobody mistakes the fallback for a silent path
    if (isObject(step.fallback) && typeof step.fallback.skillName === "string") {
      const fb = skillOf(step.fallback.skillName);
      if (fb?.requiresConfirmation)
        warn("fallback_confirmation", `fallback ${fb.name} requires confirmation: a person confirms it before it runs`);
    }

    if (isObject(step.retry)) {
      const proposed = typeof step.retry.maxAttempts === "number" ? step.retry.maxAttempts : undefined;
      if (hasSideEffects(skill) && !skill.idempotent) {
        // a retry of a non-idempotent side effect could repeat it: one attempt only
        // (an absent maxAttempts means the default of 2; exactly 1 is already what we want)
        if (proposed !== 1) {
          step.retry = { maxAttempts: 1 };
          warn(
            "retry_not_allowed",
            `retry${proposed !== undefined ? ` (maxAttempts ${proposed})` : ""} removed: ${skill.name} has non-idempotent ${skill.sideEffects} side effects and runs at most once`,
          );
        }
      } else if (proposed !== undefined && proposed > limits.maxAttempts) {
        step.retry = { ...step.retry, maxAttempts: limits.maxAttempts };
        warn("retry_capped", `retry.maxAttempts ${proposed} capped at ${limits.maxAttempts}`);
      }
    }

    if (typeof step.timeoutMs === "number" && step.timeoutMs > limits.maxStepTimeoutMs) {
      warn("timeout_capped", `timeoutMs ${step.timeoutMs} capped at ${limits.maxStepTimeoutMs}`);
      step.timeoutMs = limits.maxStepTimeoutMs;
    }

    if (step.rollback !== undefined) {
      delete step.rollback;
      warn(
        "rollback_ignored",
        `the proposed rollback was dropped: compensation comes from ${skill.name}'s own metadata`,
      );
    }

    if (step.acceptNoCompensation !== undefined) {
      delete step.acceptNoCompensation;
      warn(
        "accept_no_compensation_ignored",
        "acceptNoCompensation was dropped: only a person may accept an effect that cannot be undone",
      );
    }
    return step;
  });
  return { plan: { ...plan, steps }, warnings };
}
