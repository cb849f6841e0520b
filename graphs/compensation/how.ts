/** How a completed step is undone: by a compensation, by deleting its records, by a rollback skill, or not at all. */
import { ErrorCode, type StepError } from "../../src/kernel/errors.js";
import { hasSideEffects, type Skill } from "../../src/skills/contract.js";
import type { CompiledStep } from "../../src/plan/validate.js";
import type { RuntimeEnv } from "../env.js";
import type { StepRecord } from "../state.js";

export type How =
  | { kind: "not_needed" }
  | { kind: "not_compensable"; why: string }
  | { kind: "compensate"; skill: Skill; effect: Effect }
  | { kind: "delete_created"; skill: Skill; effect: Effect }
  | { kind: "rollback_skill"; skill: Skill; arguments: Record<string, unknown>; effect: Effect };

/** A way of undoing that runs something. */
export type Undo = Extract<How, { kind: "compensate" | "delete_created" | "rollback_skill" }>;

/** The execution being undone: what ran it, with which input, what it returned, under which key. */
export interface Effect {
  skill: Skill;
  input: unknown;
  output: unknown;
  /** `step` (the step's skill) or `fallback` (its fallback skill) */
  unit: "step" | "fallback";
}

/**
 * How a completed step is undone: by the skill whose effect it is. A step completed by its
 * fallback skill is undone by that skill's own compensation (the plan's `rollback` describes the
 * step's skill, not the fallback); a fallback value is not an effect and needs no undoing.
 */
export function compensationFor(
  c: CompiledStep,
  r: Pick<StepRecord, "usedFallback" | "input" | "output" | "fallbackInput">,
  env: Pick<RuntimeEnv, "registry">,
): How {
  if (r.usedFallback) {
    const fb = c.step.fallback;
    if (!fb || "value" in fb) return { kind: "not_needed" };
    const skill = env.registry.get(fb.skillName)!;
    const effect: Effect = { skill, input: r.fallbackInput, output: r.output, unit: "fallback" };
    if (skill.compensate) return { kind: "compensate", skill, effect };
    if (skill.createdRecords) return { kind: "delete_created", skill, effect };
    return hasSideEffects(skill)
      ? { kind: "not_compensable", why: `its fallback skill ${skill.name} has side effects and no compensation` }
      : { kind: "not_needed" };
  }
  const effect: Effect = { skill: c.skill, input: r.input, output: r.output, unit: "step" };
  const rb = c.step.rollback;
  const effects = hasSideEffects(c.skill);
  if (rb?.kind === "none")
    return effects ? { kind: "not_compensable", why: "its rollback is declared none" } : { kind: "not_needed" };
  if (rb?.kind === "skill")
    return { kind: "rollback_skill", skill: env.registry.get(rb.skillName)!, arguments: rb.arguments ?? {}, effect };
  if (rb?.kind === "delete_created_records") {
    return c.skill.createdRecords
      ? { kind: "delete_created", skill: c.skill, effect }
      : { kind: "not_compensable", why: "its skill does not report created records" };
  }
  if (c.skill.compensate) return { kind: "compensate", skill: c.skill, effect };
  if (c.skill.createdRecords) return { kind: "delete_created", skill: c.skill, effect };
  return effects ? { kind: "not_compensable", why: "it has side effects and no compensation" } : { kind: "not_needed" };
}

/** The error a step that cannot be undone is recorded with. */
export function notCompensableError(c: CompiledStep, r: Pick<StepRecord, "usedFallback">, why: string): StepError {
  const fb = c.step.fallback;
  const skillName = r.usedFallback ? (fb && "skillName" in fb ? fb.skillName : c.skill.name) : c.skill.name;
  return { code: ErrorCode.NOT_COMPENSABLE, message: `step "${c.id}" (${skillName}) cannot be undone: ${why}` };
}
