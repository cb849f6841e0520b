/**
 * One step's references, arguments and effect rules: every `$ref` names something that exists and
 * runs before (a dependency's declared output can have the path), arguments within the value
 * budget and valid for the skill when they can be resolved now, and the rules for effects (what
 * strict rollback needs, what a compensation may be).
 */
import { z } from "zod";
import { ErrorCode, type ToolchainError } from "../kernel/errors.js";
import { compensable } from "../kernel/confirmation.js";
import { strictest, undecidable } from "../kernel/approval-policy.js";
import { valueTooLarge } from "../kernel/value-budget.js";
import type { Skill } from "../skills/contract.js";
import { hasSideEffects } from "../skills/contract.js";
import type { SkillRegistry } from "../skills/registry.js";
import { checkPath, outputJsonSchema } from "./output-paths.js";
import type { PlanIssue } from "./plan-issues.js";
import { collectRefs, readPath, resolveArguments, staticArgumentBytes, type ParsedRef } from "./refs.js";
import type { ToolChainPlan, ToolChainStep } from "./schema.js";
import type { ValidateOptions } from "./validate-options.js";

export interface StepCheckEnv {
  plan: ToolChainPlan;
  opts: ValidateOptions;
  registry: SkillRegistry;
  byStep: ReadonlyMap<string, ToolChainStep>;
  memoryKeys: ReadonlyMap<string, string>;
  isAncestor: (anc: string, of: string) => boolean;
  /** The value budget for resolved arguments (bytes). */
  budget: number;
  /** The run's memory without the keys steps write (those are only known at run time). */
  initialMemory: Record<string, unknown> | undefined;
  issues: PlanIssue[];
}

/** Checks step `s`, pushing what is wrong to `env.issues`; returns its argument references (undefined: unparsable). */
export function checkStep(s: ToolChainStep, env: StepCheckEnv): ParsedRef[] | undefined {
  const { plan, opts, registry, byStep, memoryKeys, isAncestor, budget, initialMemory, issues } = env;
  let refs: ParsedRef[];
  try {
    refs = [
      ...collectRefs(s.arguments, "arguments"),
      ...collectRefs(s.rollback?.kind === "skill" ? (s.rollback.arguments ?? {}) : {}, "rollback.arguments"),
    ];
    if (s.fallback && "skillName" in s.fallback)
      refs.push(...collectRefs(s.fallback.arguments ?? {}, "fallback.arguments"));
  } catch (e) {
    issues.push({
      code: ErrorCode.INVALID_REFERENCE,
      message: `step "${s.stepId}": ${(e as Error).message}`,
      stepId: s.stepId,
    });
    return undefined;
  }
  const argRefs = refs.filter((r) => r.at.startsWith("arguments"));
  for (const r of refs) {
    if (r.root === "self") {
      if (!r.at.startsWith("rollback.arguments"))
        issues.push({
          code: ErrorCode.INVALID_REFERENCE,
          message: `step "${s.stepId}": ${r.at}: $ref "${r.raw}": self.… is only available in rollback arguments`,
          stepId: s.stepId,
          path: r.at,
        });
      else if (r.path[0] === "output") {
        const field = outputProblem(s, r.path.slice(1), registry);
        if (field)
          issues.push({
            code: ErrorCode.UNKNOWN_OUTPUT_FIELD,
            message: `step "${s.stepId}": ${r.at}: $ref "${r.raw}" ${field}`,
            stepId: s.stepId,
            path: r.at,
          });
      }
      continue;
    }
    const problem = checkRef(r, s.stepId, {
      isAncestor,
      memoryKeys,
      context: opts.context,
      memory: opts.memory,
      stepIds: byStep,
    });
    if (problem) {
      issues.push({
        code: ErrorCode.INVALID_REFERENCE,
        message: `step "${s.stepId}": ${r.at}: $ref "${r.raw}" ${problem}`,
        stepId: s.stepId,
        path: r.at,
      });
      continue;
    }
    // the referenced step exists and runs before: its declared output must be able to have the path
    const producer =
      r.root === "steps"
        ? byStep.get(r.path[0]!)
        : r.root === "memory"
          ? byStep.get(memoryKeys.get(r.path[0]!) ?? "")
          : undefined;
    const field = producer && outputProblem(producer, r.path.slice(1), registry);
    if (field)
      issues.push({
        code: ErrorCode.UNKNOWN_OUTPUT_FIELD,
        message: `step "${s.stepId}": ${r.at}: $ref "${r.raw}" ${field}`,
        stepId: s.stepId,
        path: r.at,
      });
  }
  // statically over the value budget (literals, and context/memory named many times): it could only fail at run time
  const sized: [string, unknown][] = [["arguments", s.arguments]];
  if (s.rollback?.kind === "skill") sized.push(["rollback.arguments", s.rollback.arguments ?? {}]);
  if (s.fallback && "skillName" in s.fallback) sized.push(["fallback.arguments", s.fallback.arguments ?? {}]);
  if (s.fallback && "value" in s.fallback) sized.push(["fallback.value", { $literal: s.fallback.value }]);
  for (const [field, v] of sized) {
    if (staticArgumentBytes(v, { context: opts.context, memory: initialMemory }, budget) > budget) {
      const e = valueTooLarge(field, budget, {
        stepId: s.stepId,
        what: field === "fallback.value" ? "the value is" : "the resolved arguments are",
      });
      issues.push({ code: e.code, message: e.message, stepId: s.stepId, path: field });
    }
  }
  const skill = registry.get(s.skillName)!;
  // validate arguments now when nothing in them depends on other steps
  const resolvable = argRefs.every((r) =>
    r.root === "context"
      ? opts.context !== undefined
      : r.root === "memory"
        ? !memoryKeys.has(r.path[0]!) && opts.memory !== undefined
        : false,
  );
  if (resolvable && !opts.skipArgumentsOf?.(s.skillName) && !issues.some((i) => i.stepId === s.stepId)) {
    let args: unknown;
    try {
      args = resolveArguments(
        s.arguments,
        { context: opts.context, memory: opts.memory ?? {}, steps: {} },
        "arguments",
        { maxBytes: budget, stepId: s.stepId },
      );
    } catch (e) {
      const code =
        (e as ToolchainError).code === ErrorCode.VALUE_TOO_LARGE
          ? ErrorCode.VALUE_TOO_LARGE
          : ErrorCode.INVALID_REFERENCE;
      issues.push({
        code,
        message:
          code === ErrorCode.VALUE_TOO_LARGE ? (e as Error).message : `step "${s.stepId}": ${(e as Error).message}`,
        stepId: s.stepId,
      });
      return argRefs;
    }
    const r = skill.input.safeParse(args);
    if (!r.success) {
      issues.push({
        code: ErrorCode.INVALID_ARGUMENTS,
        message: `step "${s.stepId}": arguments do not match ${s.skillName}: ${z.prettifyError(r.error).replace(/\n/g, "; ")}`,
        stepId: s.stepId,
        path: "arguments",
      });
    }
  }
  effectIssues(plan, s, skill, registry, issues);
  return argRefs;
}

/** What strict rollback asks of a step's effects, and what a compensation may be. */
function effectIssues(
  plan: ToolChainPlan,
  s: ToolChainStep,
  skill: Skill,
  registry: SkillRegistry,
  issues: PlanIssue[],
): void {
  if (s.rollback?.kind === "delete_created_records" && !skill.createdRecords) {
    issues.push({
      code: ErrorCode.NOT_COMPENSABLE,
      message: `step "${s.stepId}": rollback delete_created_records needs a skill that reports the records it creates; "${s.skillName}" does not`,
      stepId: s.stepId,
      path: "rollback",
    });
  }
  // strict rollback refuses side effects that cannot be undone
  if (plan.rollbackMode === "strict" && hasSideEffects(skill) && !s.acceptNoCompensation) {
    const undoable = s.rollback ? s.rollback.kind !== "none" : compensable(skill);
    if (!undoable) {
      issues.push({
        code: ErrorCode.NOT_COMPENSABLE,
        message: `step "${s.stepId}": skill "${s.skillName}" has side effects and no compensation; strict rollback needs one (or acceptNoCompensation: true)`,
        stepId: s.stepId,
      });
    }
  }
  // a fallback skill is an effect of its own: strict mode asks the same of it (the step's
  // rollback does not undo it; the fallback skill's own compensation does)
  const fbSkill = s.fallback && "skillName" in s.fallback ? registry.get(s.fallback.skillName) : undefined;
  if (fbSkill && plan.rollbackMode === "strict" && !compensable(fbSkill) && !s.acceptNoCompensation) {
    issues.push({
      code: ErrorCode.NOT_COMPENSABLE,
      message: `step "${s.stepId}": fallback skill "${fbSkill.name}" has side effects and no compensation; strict rollback needs one (or acceptNoCompensation: true)`,
      stepId: s.stepId,
      path: "fallback.skillName",
    });
  }
  // a step's policy whose users have no one in common with its skill's would let nobody decide:
  // the run would wait forever (tightening, but a plan nobody can carry out)
  for (const sk of [skill, fbSkill]) {
    if (!sk || !s.approval) continue;
    const why = undecidable(strictest(sk.approval, s.approval));
    if (why)
      issues.push({
        code: ErrorCode.PLAN_INVALID,
        message: `step "${s.stepId}": approval.users: ${why} (skill "${sk.name}" lets only users ${sk.approval?.users?.join(", ")} decide)`,
        stepId: s.stepId,
        path: "approval.users",
      });
  }
  // a rollback runs when things already went wrong, with nobody asked: a skill that needs a
  // person's confirmation cannot be a compensation
  const rbSkill = s.rollback?.kind === "skill" ? registry.get(s.rollback.skillName) : undefined;
  if (rbSkill?.requiresConfirmation) {
    issues.push({
      code: ErrorCode.CONFIRMATION_REQUIRED,
      message: `step "${s.stepId}": rollback skill "${rbSkill.name}" requires confirmation; a compensation runs unattended, so it must be a skill that does not ask`,
      stepId: s.stepId,
      path: "rollback.skillName",
    });
  }
}

/**
 * Why no output of `step` can have `path`, or undefined when one can (or the skill declares no
 * output schema). A step that may complete through its fallback admits what the fallback admits.
 */
function outputProblem(step: ToolChainStep, path: readonly string[], registry: SkillRegistry): string | undefined {
  if (path.length === 0) return undefined;
  const skill = registry.get(step.skillName);
  const schema = skill && outputJsonSchema(skill);
  if (!skill || schema === undefined) return undefined;
  const c = checkPath(schema, path);
  if (c.ok) return undefined;
  const fb = step.fallback;
  if (fb && "value" in fb && readPath(fb.value, path).found) return undefined;
  if (fb && "skillName" in fb) {
    const other = registry.get(fb.skillName);
    const otherSchema = other && outputJsonSchema(other);
    if (otherSchema === undefined || checkPath(otherSchema, path).ok) return undefined;
  }
  const field = path.slice(0, c.at + 1).join(".");
  return `names "${field}", which the output of step "${step.stepId}" (${skill.name}) cannot have${c.known.length ? `; it declares ${c.known.map((k) => `"${k}"`).join(", ")}` : ""}`;
}

function checkRef(
  r: ParsedRef,
  stepId: string,
  env: {
    isAncestor: (anc: string, of: string) => boolean;
    memoryKeys: ReadonlyMap<string, string>;
    stepIds: ReadonlyMap<string, unknown>;
    context: unknown;
    memory: Record<string, unknown> | undefined;
  },
): string | undefined {
  if (r.root === "steps") {
    const target = r.path[0]!;
    if (!env.stepIds.has(target)) return `names unknown step "${target}"`;
    if (!env.isAncestor(target, stepId))
      return `reads step "${target}", which is not a (transitive) dependency of "${stepId}"`;
    return undefined;
  }
  if (r.root === "memory") {
    const key = r.path[0]!;
    const producer = env.memoryKeys.get(key);
    if (producer) {
      return env.isAncestor(producer, stepId)
        ? undefined
        : `reads memory "${key}", saved by step "${producer}", which is not a (transitive) dependency of "${stepId}"`;
    }
    if (env.memory === undefined) return undefined;
    return readPath(env.memory, r.path).found ? undefined : `does not resolve in the run's memory`;
  }
  if (env.context === undefined) return undefined;
  return readPath(env.context, r.path).found ? undefined : `does not resolve in the run's context`;
}
