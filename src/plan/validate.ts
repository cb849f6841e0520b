/**
 * Plan validation and compilation: pure, runs before anything executes. Every problem gets a
 * stable code; the error carries all of them in `details.issues`, the first one names the error.
 * Parsing (parse-plan.ts), structure (check-structure.ts), each step's references, arguments and
 * effect rules (check-step.ts) and the order (topo.ts) each have their file; this one compiles.
 */
import { ErrorCode } from "../kernel/errors.js";
import type { Skill } from "../skills/contract.js";
import { ancestorSets } from "./reachability.js";
import { maxValueBytes } from "../kernel/value-budget.js";
import type { ParsedRef } from "./refs.js";
import { compileRetry, type CompiledRetry } from "./retry-policy.js";
import { MAX_STEPS, type FailurePolicy, type ToolChainPlan, type ToolChainStep } from "./schema.js";
import { PlanValidationError, type PlanIssue } from "./plan-issues.js";
import { parsePlan } from "./parse-plan.js";
import { checkStructure } from "./check-structure.js";
import { checkStep } from "./check-step.js";
import { topoSort } from "./topo.js";

export { PlanValidationError, RESERVED_IDS, type PlanIssue } from "./plan-issues.js";
export type { ValidateOptions } from "./validate-options.js";
import type { ValidateOptions } from "./validate-options.js";

export interface CompiledStep {
  index: number;
  id: string;
  step: ToolChainStep;
  skill: Skill;
  deps: readonly string[];
  successors: string[];
  refs: readonly ParsedRef[];
  retry: CompiledRetry;
  onFailure: FailurePolicy;
  /** Estimated duration of this step (ms; 1 when unknown). */
  weight: number;
  /** Longest remaining path from the start of this step to the end of the plan (ms). */
  priority: number;
}

export interface CompiledPlan {
  plan: ToolChainPlan;
  steps: CompiledStep[];
  byId: ReadonlyMap<string, CompiledStep>;
  /** Step ids in a topological order (declaration order among independent steps). */
  topo: string[];
  /** saveResultAs key -> stepId */
  memoryKeys: ReadonlyMap<string, string>;
}

/** Parse + validate + compile in one synchronous call. Throws PlanValidationError. */
export function compilePlan(input: unknown, opts: ValidateOptions): CompiledPlan {
  const work = compileSteps(input, opts);
  for (;;) {
    const r = work.next();
    if (r.done) return r.value;
  }
}

/**
 * `compilePlan` that gives the event loop back at least every `sliceMs` (default 10 ms), so a
 * 10,000-step plan does not stall other requests while it is validated. Same result and errors.
 */
export async function compilePlanAsync(
  input: unknown,
  opts: ValidateOptions & { sliceMs?: number },
): Promise<CompiledPlan> {
  const sliceMs = opts.sliceMs ?? 10;
  const work = compileSteps(input, opts);
  let since = performance.now();
  for (;;) {
    const r = work.next();
    if (r.done) return r.value;
    if (performance.now() - since >= sliceMs) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      since = performance.now();
    }
  }
}

function* compileSteps(input: unknown, opts: ValidateOptions): Generator<void, CompiledPlan> {
  const maxSteps = opts.maxSteps ?? MAX_STEPS;
  const rawSteps = (input as { steps?: unknown } | null)?.steps;
  if (Array.isArray(rawSteps) && rawSteps.length > maxSteps) {
    throw new PlanValidationError([
      { code: ErrorCode.PLAN_TOO_LARGE, message: `plan has ${rawSteps.length} steps; the limit is ${maxSteps}` },
    ]);
  }
  const plan = yield* parsePlan(input);
  const issues: PlanIssue[] = [];
  const { registry } = opts;

  const { byStep, memoryKeys } = yield* checkStructure(plan, opts, issues);
  if (issues.length) throw new PlanValidationError(issues);

  // topological order (Kahn), naming a cycle if there is one
  const deps = new Map<string, string[]>();
  for (const s of plan.steps) deps.set(s.stepId, [...new Set(s.dependsOn)]);
  const topo = topoSort(
    plan.steps.map((s) => s.stepId),
    deps,
  );
  if (!topo.ok) {
    throw new PlanValidationError([
      { code: ErrorCode.PLAN_CYCLE, message: `plan has a cycle: ${topo.cycle.join(" -> ")}` },
    ]);
  }
  yield;
  const { isAncestor } = yield* ancestorSets(topo.order, deps);

  // references and arguments
  const refsByStep = new Map<string, ParsedRef[]>();
  const budget = opts.maxValueBytes ?? maxValueBytes();
  // memory keys a step writes are only known at run time: they count nothing in the static bound
  const initialMemory =
    opts.memory && Object.fromEntries(Object.entries(opts.memory).filter(([k]) => !memoryKeys.has(k)));
  for (const s of plan.steps) {
    yield;
    const argRefs = checkStep(s, {
      plan,
      opts,
      registry,
      byStep,
      memoryKeys,
      isAncestor,
      budget,
      initialMemory,
      issues,
    });
    if (argRefs) refsByStep.set(s.stepId, argRefs);
  }
  if (issues.length) throw new PlanValidationError(issues);
  yield;

  // compile
  const steps: CompiledStep[] = [];
  for (const [index, s] of plan.steps.entries()) {
    yield;
    const skill = registry.get(s.skillName)!;
    const refs = refsByStep.get(s.stepId) ?? [];
    // arguments that read other steps are only known at run time: estimate from observations
    const est = registry.estimateMs(s.skillName, refs.length === 0 ? s.arguments : undefined);
    steps.push({
      index,
      id: s.stepId,
      step: s,
      skill,
      deps: deps.get(s.stepId)!,
      successors: [],
      refs,
      retry: compileRetry(s.retry),
      onFailure: s.onFailure ?? plan.onFailure,
      weight: Math.max(est ?? 1, 0.001),
      priority: 0,
    });
  }
  const byId = new Map(steps.map((c) => [c.id, c]));
  for (const c of steps) for (const d of c.deps) byId.get(d)!.successors.push(c.id);
  yield;
  for (let i = topo.order.length - 1; i >= 0; i--) {
    const c = byId.get(topo.order[i]!)!;
    let best = 0;
    for (const sid of c.successors) best = Math.max(best, byId.get(sid)!.priority);
    c.priority = c.weight + best;
  }
  return { plan, steps, byId, topo: topo.order, memoryKeys };
}
