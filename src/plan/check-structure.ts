/**
 * The plan's structure: unique and unreserved step ids, known and allowed skills (the step's, its
 * rollback's and its fallback's), dependencies on steps that exist, unique memory keys.
 */
import { ErrorCode } from "../kernel/errors.js";
import { RESERVED_IDS, type PlanIssue } from "./plan-issues.js";
import type { ToolChainPlan, ToolChainStep } from "./schema.js";
import type { ValidateOptions } from "./validate-options.js";

export interface PlanStructure {
  byStep: Map<string, ToolChainStep>;
  /** saveResultAs key -> stepId */
  memoryKeys: Map<string, string>;
}

export function* checkStructure(
  plan: ToolChainPlan,
  opts: ValidateOptions,
  issues: PlanIssue[],
): Generator<void, PlanStructure> {
  const { registry } = opts;
  const byStep = new Map<string, ToolChainStep>();
  for (const s of plan.steps) {
    if (byStep.has(s.stepId)) {
      issues.push({ code: ErrorCode.DUPLICATE_STEP_ID, message: `duplicate stepId "${s.stepId}"`, stepId: s.stepId });
    } else byStep.set(s.stepId, s);
  }
  const checkSkill = (name: string, stepId: string, field: string) => {
    if (!registry.has(name)) {
      issues.push({
        code: ErrorCode.UNKNOWN_SKILL,
        message: `step "${stepId}": unknown skill "${name}" in ${field}`,
        stepId,
        path: field,
      });
    } else if (opts.allowSkill && !opts.allowSkill(name)) {
      issues.push({
        code: ErrorCode.SKILL_NOT_ALLOWED,
        message: `step "${stepId}": skill "${name}" is not allowed in this workspace`,
        stepId,
        path: field,
      });
    }
  };
  const memoryKeys = new Map<string, string>();
  for (const s of plan.steps) {
    if (RESERVED_IDS.has(s.stepId)) {
      issues.push({
        code: ErrorCode.RESERVED_ID,
        message: `step "${s.stepId}": stepId names a member of Object.prototype; choose another id`,
        stepId: s.stepId,
        path: "stepId",
      });
    }
    if (s.saveResultAs && RESERVED_IDS.has(s.saveResultAs)) {
      issues.push({
        code: ErrorCode.RESERVED_ID,
        message: `step "${s.stepId}": saveResultAs "${s.saveResultAs}" names a member of Object.prototype; choose another key`,
        stepId: s.stepId,
        path: "saveResultAs",
      });
    }
    yield;
    checkSkill(s.skillName, s.stepId, "skillName");
    if (s.rollback?.kind === "skill") checkSkill(s.rollback.skillName, s.stepId, "rollback.skillName");
    if (s.fallback && "skillName" in s.fallback) checkSkill(s.fallback.skillName, s.stepId, "fallback.skillName");
    for (const d of s.dependsOn) {
      if (d === s.stepId)
        issues.push({
          code: ErrorCode.SELF_DEPENDENCY,
          message: `step "${s.stepId}" depends on itself`,
          stepId: s.stepId,
        });
      else if (!byStep.has(d))
        issues.push({
          code: ErrorCode.UNKNOWN_DEPENDENCY,
          message: `step "${s.stepId}" depends on unknown step "${d}"`,
          stepId: s.stepId,
        });
    }
    if (s.saveResultAs) {
      const prev = memoryKeys.get(s.saveResultAs);
      if (prev)
        issues.push({
          code: ErrorCode.DUPLICATE_RESULT_KEY,
          message: `steps "${prev}" and "${s.stepId}" both saveResultAs "${s.saveResultAs}"`,
          stepId: s.stepId,
        });
      else memoryKeys.set(s.saveResultAs, s.stepId);
    }
  }
  return { byStep, memoryKeys };
}
