/**
 * Plan admission: who wrote a plan decides what it may say about execution semantics.
 *
 * - `person` (a key over REST, the CLI, the library): the plan as written, except that removing a
 *   skill's confirmation (`requireConfirmation: false`) needs a permission and is never allowed for
 *   an external, irreversible skill (src/kernel/confirmation.ts `mayRelax`).
 * - `model` (the planner) and `agent` (MCP tools, LangChain agent tools, Studio input): clamped to
 *   the skills' metadata (src/plan/clamp.ts: may tighten, never loosen) and held to a budget
 *   (steps, confirmations, fan-out).
 *
 * Pure: the runtime admits before it creates a run, the graph's planner node admits again (a
 * plan given to the graph directly, or edited in the checkpoint, goes through the same code).
 */
import type { Actor, Via } from "../kernel/actor.js";
import { ErrorCode } from "../kernel/errors.js";
import { mayRelax, plannedConfirmation } from "../kernel/confirmation.js";
import type { Skill } from "../skills/contract.js";
import { clampPlan, type ClampLimits, type PlanWarning } from "./clamp.js";
import { collectRefs } from "./refs.js";
import type { ToolChainStep } from "./schema.js";
import { PlanValidationError, type PlanIssue } from "./validate.js";

/** The principal who started a run, and the surface they used. */
export type Requester = Actor & { via: Via };

export type AuthorKind = "person" | "model" | "agent";
export const AUTHOR_KINDS: readonly AuthorKind[] = ["person", "model", "agent"];
/** The surface a plan came through. */
export type AuthorVia = "library" | "rest" | "cli" | "console" | "mcp" | "agent" | "studio" | "planner";
export const AUTHOR_VIAS: readonly AuthorVia[] = [
  "library",
  "rest",
  "cli",
  "console",
  "mcp",
  "agent",
  "studio",
  "planner",
];

export interface PlanAuthor {
  kind: AuthorKind;
  via: AuthorVia;
  /** A person allowed to remove confirmations where the skill permits it. @default false */
  mayRelaxConfirmation?: boolean;
}

/** Limits on what a model or an agent may ask the runtime to run. */
export interface PlanBudget {
  /** @default 50 */
  maxSteps: number;
  /** Steps (or their fallbacks) that will or may ask a person. @default 10 */
  maxConfirmations: number;
  /** Steps that may start side by side: roots, or dependents of one step. @default 20 */
  maxFanOut: number;
}
export const DEFAULT_PLAN_BUDGET: PlanBudget = { maxSteps: 50, maxConfirmations: 10, maxFanOut: 20 };

export const LIBRARY_AUTHOR: PlanAuthor = { kind: "person", via: "library", mayRelaxConfirmation: true };

export interface Admission {
  author: PlanAuthor;
  /** Who asked for the run (src/kernel/actor.ts); absent on runs recorded before principals existed. */
  requestedBy?: Requester;
  /** One per change made to the plan (clamps) or note about it. */
  warnings: PlanWarning[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The plan as it may run for this author, with the warnings of what changed. Throws
 * PlanValidationError (CONFIRMATION_REQUIRED, PLAN_OVER_BUDGET) for what cannot be admitted.
 */
export function admitPlan(
  plan: unknown,
  author: PlanAuthor,
  skillOf: (name: string) => Skill | undefined,
  limits: ClampLimits,
  budget: PlanBudget,
): { plan: unknown; admission: Admission } {
  if (author.kind === "person") {
    const issues = relaxIssues(plan, author, skillOf);
    if (issues.length) throw new PlanValidationError(issues);
    return { plan, admission: { author, warnings: [] } };
  }
  const clamped = clampPlan(plan, skillOf, limits);
  const over = budgetIssues(clamped.plan, skillOf, budget);
  if (over.length) throw new PlanValidationError(over);
  return { plan: clamped.plan, admission: { author, warnings: clamped.warnings } };
}

/** A person's `requireConfirmation: false` where they may not write it. */
export function relaxIssues(
  plan: unknown,
  author: PlanAuthor,
  skillOf: (name: string) => Skill | undefined,
): PlanIssue[] {
  if (!isObject(plan) || !Array.isArray(plan.steps)) return [];
  const issues: PlanIssue[] = [];
  for (const s of plan.steps) {
    if (!isObject(s) || s.requireConfirmation !== false || typeof s.skillName !== "string") continue;
    const skill = skillOf(s.skillName);
    if (!skill || mayRelax(skill, author)) continue;
    const stepId = typeof s.stepId === "string" ? s.stepId : "?";
    const why =
      author.kind === "person" && author.mayRelaxConfirmation
        ? `${skill.name} is external and cannot be undone: it always asks`
        : `this key may not remove confirmations (permission relax_confirmation)`;
    issues.push({
      code: ErrorCode.CONFIRMATION_REQUIRED,
      message: `step "${stepId}": requireConfirmation: false refused: ${skill.name} requires confirmation and ${why}`,
      stepId,
      path: "requireConfirmation",
    });
  }
  return issues;
}

/** Budget issues of a (clamped) plan: each names the budget and the figure. */
export function budgetIssues(
  plan: unknown,
  skillOf: (name: string) => Skill | undefined,
  budget: PlanBudget,
): PlanIssue[] {
  if (!isObject(plan) || !Array.isArray(plan.steps)) return [];
  const steps = plan.steps.filter(isObject);
  const issues: PlanIssue[] = [];
  if (steps.length > budget.maxSteps) {
    issues.push({
      code: ErrorCode.PLAN_OVER_BUDGET,
      message: `plan has ${steps.length} steps; the budget for model and agent plans is ${budget.maxSteps} (maxSteps)`,
      path: "steps",
    });
  }
  let asks = 0;
  const dependents = new Map<string, number>();
  let roots = 0;
  for (const s of steps) {
    const deps = Array.isArray(s.dependsOn) ? s.dependsOn : [];
    if (!deps.length) roots++;
    for (const d of new Set(deps)) if (typeof d === "string") dependents.set(d, (dependents.get(d) ?? 0) + 1);
    const skill = typeof s.skillName === "string" ? skillOf(s.skillName) : undefined;
    if (
      skill &&
      plannedConfirmation(skill, s.requireConfirmation as boolean | undefined, staticArgs(s.arguments)) !== "no"
    )
      asks++;
    else if (isObject(s.fallback) && typeof s.fallback.skillName === "string") {
      const fb = skillOf(s.fallback.skillName);
      if (fb && plannedConfirmation(fb, undefined, staticArgs(s.fallback.arguments)) !== "no") asks++;
    }
  }
  if (asks > budget.maxConfirmations) {
    issues.push({
      code: ErrorCode.PLAN_OVER_BUDGET,
      message: `plan has ${asks} steps that ask for confirmation; the budget for model and agent plans is ${budget.maxConfirmations} (maxConfirmations)`,
      path: "steps",
    });
  }
  const widest = Math.max(roots, ...dependents.values());
  if (widest > budget.maxFanOut) {
    issues.push({
      code: ErrorCode.PLAN_OVER_BUDGET,
      message: `plan fans out to ${widest} steps at once; the budget for model and agent plans is ${budget.maxFanOut} (maxFanOut)`,
      path: "steps",
    });
  }
  return issues;
}

/**
 * Whether a step will (or may) ask a person before its effect: its skill's rule (tightened by the
 * plan), or its fallback skill's. What `toolchain plan`, the agent tools and the budget say.
 */
export function stepAsks(registry: { get(name: string): Skill | undefined }, s: ToolChainStep): boolean {
  const skill = registry.get(s.skillName);
  const own = skill
    ? plannedConfirmation(skill, s.requireConfirmation, staticArgs(s.arguments)) !== "no"
    : s.requireConfirmation === true;
  if (own) return true;
  const fb = s.fallback && "skillName" in s.fallback ? s.fallback : undefined;
  const fbSkill = fb ? registry.get(fb.skillName) : undefined;
  return fbSkill ? plannedConfirmation(fbSkill, undefined, staticArgs(fb!.arguments)) !== "no" : false;
}

/** Arguments without references (known now), else undefined. */
function staticArgs(args: unknown): unknown {
  if (args === undefined) return {};
  try {
    return collectRefs(args as Record<string, unknown>, "arguments").length ? undefined : args;
  } catch {
    return undefined;
  }
}

const positiveInt = (name: string, raw: string | undefined, fallback: number): number => {
  if (raw === undefined || raw.trim() === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new TypeError(`Expected ${name} to be an integer >= 1, got "${raw}"`);
  return n;
};

/** `TOOLCHAIN_AGENT_PLAN_MAX_STEPS`, `…_MAX_CONFIRMATIONS`, `…_MAX_FAN_OUT` (defaults above). */
export function planBudgetFromEnv(env: NodeJS.ProcessEnv = process.env): PlanBudget {
  return {
    maxSteps: positiveInt(
      "TOOLCHAIN_AGENT_PLAN_MAX_STEPS",
      env.TOOLCHAIN_AGENT_PLAN_MAX_STEPS,
      DEFAULT_PLAN_BUDGET.maxSteps,
    ),
    maxConfirmations: positiveInt(
      "TOOLCHAIN_AGENT_PLAN_MAX_CONFIRMATIONS",
      env.TOOLCHAIN_AGENT_PLAN_MAX_CONFIRMATIONS,
      DEFAULT_PLAN_BUDGET.maxConfirmations,
    ),
    maxFanOut: positiveInt(
      "TOOLCHAIN_AGENT_PLAN_MAX_FAN_OUT",
      env.TOOLCHAIN_AGENT_PLAN_MAX_FAN_OUT,
      DEFAULT_PLAN_BUDGET.maxFanOut,
    ),
  };
}
