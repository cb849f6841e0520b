/**
 * The model never decides execution semantics: what a model-written plan proposes for retries,
 * timeouts, rollback and confirmation is clamped to what each skill's metadata and the
 * configuration allow. Pure; every change is reported as a warning. Runs on the raw plan (before
 * validation), so it tolerates any shape and only touches steps naming a registered skill.
 */
import { hasSideEffects, type Skill } from "../skills/contract.js";
import type { PlannerConfig } from "./config.js";

export type PlanWarningCode =
  | "confirmation_required"
  | "retry_not_allowed"
  | "retry_capped"
  | "timeout_capped"
  | "rollback_ignored"
  | "accept_no_compensation_ignored"
  | "repaired"
  | "no_target_table";

export interface PlanWarning {
  code: PlanWarningCode;
  stepId?: string;
  message: string;
}

type Limits = Pick<PlannerConfig, "maxAttempts" | "maxStepTimeoutMs">;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A copy of `plan` clamped to the skills' metadata, and one warning per change. */
export function clampPlan(plan: unknown, skillOf: (name: string) => Skill | undefined, limits: Limits): { plan: unknown; warnings: PlanWarning[] } {
  if (!isObject(plan) || !Array.isArray(plan.steps)) return { plan, warnings: [] };
  const warnings: PlanWarning[] = [];
  const steps = plan.steps.map((raw): unknown => {
    if (!isObject(raw) || typeof raw.skillName !== "string") return raw;
    const skill = skillOf(raw.skillName);
    if (!skill) return raw;
    const step: Record<string, unknown> = { ...raw };
    const stepId = typeof step.stepId === "string" ? step.stepId : undefined;
    const warn = (code: PlanWarningCode, message: string) => warnings.push({ code, ...(stepId ? { stepId } : {}), message: `step "${stepId ?? "?"}": ${message}` });

    if (step.requireConfirmation === false && skill.requiresConfirmation) {
      delete step.requireConfirmation;
      warn("confirmation_required", `requireConfirmation: false ignored: ${skill.name} requires confirmation${typeof skill.requiresConfirmation === "function" ? " for some arguments" : ""}`);
    }

    if (isObject(step.retry)) {
      const proposed = typeof step.retry.maxAttempts === "number" ? step.retry.maxAttempts : undefined;
      if (hasSideEffects(skill) && !skill.idempotent) {
        // a retry of a non-idempotent side effect could repeat it: one attempt only
        // (an absent maxAttempts means the default of 2; exactly 1 is already what we want)
        if (proposed !== 1) {
          step.retry = { maxAttempts: 1 };
          warn("retry_not_allowed", `retry${proposed !== undefined ? ` (maxAttempts ${proposed})` : ""} removed: ${skill.name} has non-idempotent ${skill.sideEffects} side effects and runs at most once`);
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
      warn("rollback_ignored", `the proposed rollback was dropped: compensation comes from ${skill.name}'s own metadata`);
    }

    if (step.acceptNoCompensation !== undefined) {
      delete step.acceptNoCompensation;
      warn("accept_no_compensation_ignored", "acceptNoCompensation was dropped: only a person may accept an effect that cannot be undone");
    }
    return step;
  });
  return { plan: { ...plan, steps }, warnings };
}
