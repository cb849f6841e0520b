/**
 * Plan validation and compilation: pure, runs before anything executes. Every problem gets a
 * stable code; the error carries all of them in `details.issues`, the first one names the error.
 */
import { z } from "zod";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import type { Skill } from "../skills/contract.js";
import { hasSideEffects } from "../skills/contract.js";
import { compensable } from "../kernel/confirmation.js";
import type { SkillRegistry } from "../skills/registry.js";
import { checkPath, outputJsonSchema } from "./output-paths.js";
import { ancestorSets } from "./reachability.js";
import { maxValueBytes, valueTooLarge } from "../kernel/value-budget.js";
import { collectRefs, readPath, resolveArguments, staticArgumentBytes, type ParsedRef } from "./refs.js";
import { compileRetry, type CompiledRetry } from "./retry-policy.js";
import { MAX_STEPS, ToolChainPlanSchema, ToolChainStepSchema, type FailurePolicy, type ToolChainPlan, type ToolChainStep } from "./schema.js";

export interface PlanIssue {
  code: ErrorCode;
  message: string;
  stepId?: string;
  path?: string;
}

export class PlanValidationError extends ToolchainError {
  constructor(readonly issues: PlanIssue[]) {
    const first = issues[0]!;
    const more = issues.length > 1 ? ` (and ${issues.length - 1} more issue${issues.length > 2 ? "s" : ""})` : "";
    super(first.code, first.message + more, { details: { issues } });
  }
}

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

export interface ValidateOptions {
  registry: SkillRegistry;
  /** Workspace allowlist. */
  allowSkill?: (name: string) => boolean;
  /** When given, context/memory references are checked against them. */
  context?: unknown;
  memory?: Record<string, unknown>;
  maxSteps?: number;
  /** The value budget for a step's resolved arguments. @default maxValueBytes() (TOOLCHAIN_MAX_VALUE_BYTES) */
  maxValueBytes?: number;
}

/**
 * Ids that name Object.prototype members (`constructor`, `toString`, `__proto__`, …). Step ids and
 * memory keys index plain objects all over the runtime, LangGraph's state and skills' code; such
 * an id would read an inherited member as its record, so it is refused (RESERVED_ID).
 */
export const RESERVED_IDS: ReadonlySet<string> = new Set(Object.getOwnPropertyNames(Object.prototype));

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
export async function compilePlanAsync(input: unknown, opts: ValidateOptions & { sliceMs?: number }): Promise<CompiledPlan> {
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

/** Parsed without the steps, which are parsed one at a time (each yields). */
const PlanShellSchema = ToolChainPlanSchema.extend({ steps: z.array(z.unknown()).min(1) });
const SHAPE_ORDER = Object.keys(ToolChainPlanSchema.shape);

function* parsePlan(input: unknown): Generator<void, ToolChainPlan> {
  const shell = PlanShellSchema.safeParse(input);
  const raw = (input as { steps?: unknown } | null)?.steps;
  const before: z.core.$ZodIssue[] = [];
  const after: z.core.$ZodIssue[] = [];
  if (!shell.success) {
    for (const i of shell.error.issues) {
      const k = SHAPE_ORDER.indexOf(String(i.path[0]));
      (k >= 0 && k < SHAPE_ORDER.indexOf("steps") ? before : after).push(i);
    }
  }
  const stepIssues: z.core.$ZodIssue[] = [];
  const steps: ToolChainStep[] = [];
  if (Array.isArray(raw)) {
    for (let i = 0; i < raw.length; i++) {
      const r = ToolChainStepSchema.safeParse(raw[i]);
      if (r.success) steps.push(r.data);
      else for (const issue of r.error.issues) stepIssues.push({ ...issue, path: ["steps", i, ...issue.path] });
      yield;
    }
  }
  const issues = [...before, ...stepIssues, ...after];
  if (issues.length || !shell.success) {
    throw new PlanValidationError(
      issues.map((i) => ({
        code: ErrorCode.PLAN_INVALID,
        message: `plan.${i.path.join(".")}: ${i.message}`,
        path: i.path.join("."),
      })),
    );
  }
  return { ...shell.data, steps };
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

  // ids, skills, dependencies
  const byStep = new Map<string, ToolChainStep>();
  for (const s of plan.steps) {
    if (byStep.has(s.stepId)) {
      issues.push({ code: ErrorCode.DUPLICATE_STEP_ID, message: `duplicate stepId "${s.stepId}"`, stepId: s.stepId });
    } else byStep.set(s.stepId, s);
  }
  const checkSkill = (name: string, stepId: string, field: string) => {
    if (!registry.has(name)) {
      issues.push({ code: ErrorCode.UNKNOWN_SKILL, message: `step "${stepId}": unknown skill "${name}" in ${field}`, stepId, path: field });
    } else if (opts.allowSkill && !opts.allowSkill(name)) {
      issues.push({ code: ErrorCode.SKILL_NOT_ALLOWED, message: `step "${stepId}": skill "${name}" is not allowed in this workspace`, stepId, path: field });
    }
  };
  const memoryKeys = new Map<string, string>();
  for (const s of plan.steps) {
    if (RESERVED_IDS.has(s.stepId)) {
      issues.push({ code: ErrorCode.RESERVED_ID, message: `step "${s.stepId}": stepId names a member of Object.prototype; choose another id`, stepId: s.stepId, path: "stepId" });
    }
    if (s.saveResultAs && RESERVED_IDS.has(s.saveResultAs)) {
      issues.push({ code: ErrorCode.RESERVED_ID, message: `step "${s.stepId}": saveResultAs "${s.saveResultAs}" names a member of Object.prototype; choose another key`, stepId: s.stepId, path: "saveResultAs" });
    }
    yield;
    checkSkill(s.skillName, s.stepId, "skillName");
    if (s.rollback?.kind === "skill") checkSkill(s.rollback.skillName, s.stepId, "rollback.skillName");
    if (s.fallback && "skillName" in s.fallback) checkSkill(s.fallback.skillName, s.stepId, "fallback.skillName");
    for (const d of s.dependsOn) {
      if (d === s.stepId) issues.push({ code: ErrorCode.SELF_DEPENDENCY, message: `step "${s.stepId}" depends on itself`, stepId: s.stepId });
      else if (!byStep.has(d)) issues.push({ code: ErrorCode.UNKNOWN_DEPENDENCY, message: `step "${s.stepId}" depends on unknown step "${d}"`, stepId: s.stepId });
    }
    if (s.saveResultAs) {
      const prev = memoryKeys.get(s.saveResultAs);
      if (prev) issues.push({ code: ErrorCode.DUPLICATE_RESULT_KEY, message: `steps "${prev}" and "${s.stepId}" both saveResultAs "${s.saveResultAs}"`, stepId: s.stepId });
      else memoryKeys.set(s.saveResultAs, s.stepId);
    }
  }
  if (issues.length) throw new PlanValidationError(issues);

  // topological order (Kahn), naming a cycle if there is one
  const deps = new Map<string, string[]>();
  for (const s of plan.steps) deps.set(s.stepId, [...new Set(s.dependsOn)]);
  const topo = topoSort(plan.steps.map((s) => s.stepId), deps);
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
  const initialMemory = opts.memory && Object.fromEntries(Object.entries(opts.memory).filter(([k]) => !memoryKeys.has(k)));
  for (const s of plan.steps) {
    yield;
    let refs: ParsedRef[];
    try {
      refs = [...collectRefs(s.arguments, "arguments"), ...collectRefs(s.rollback?.kind === "skill" ? s.rollback.arguments ?? {} : {}, "rollback.arguments")];
      if (s.fallback && "skillName" in s.fallback) refs.push(...collectRefs(s.fallback.arguments ?? {}, "fallback.arguments"));
    } catch (e) {
      issues.push({ code: ErrorCode.INVALID_REFERENCE, message: `step "${s.stepId}": ${(e as Error).message}`, stepId: s.stepId });
      continue;
    }
    const argRefs = refs.filter((r) => r.at.startsWith("arguments"));
    refsByStep.set(s.stepId, argRefs);
    for (const r of refs) {
      if (r.root === "self") {
        if (!r.at.startsWith("rollback.arguments")) issues.push({ code: ErrorCode.INVALID_REFERENCE, message: `step "${s.stepId}": ${r.at}: $ref "${r.raw}": self.… is only available in rollback arguments`, stepId: s.stepId, path: r.at });
        else if (r.path[0] === "output") {
          const field = outputProblem(s, r.path.slice(1), registry);
          if (field) issues.push({ code: ErrorCode.UNKNOWN_OUTPUT_FIELD, message: `step "${s.stepId}": ${r.at}: $ref "${r.raw}" ${field}`, stepId: s.stepId, path: r.at });
        }
        continue;
      }
      const problem = checkRef(r, s.stepId, { isAncestor, memoryKeys, context: opts.context, memory: opts.memory, stepIds: byStep });
      if (problem) {
        issues.push({ code: ErrorCode.INVALID_REFERENCE, message: `step "${s.stepId}": ${r.at}: $ref "${r.raw}" ${problem}`, stepId: s.stepId, path: r.at });
        continue;
      }
      // the referenced step exists and runs before: its declared output must be able to have the path
      const producer = r.root === "steps" ? byStep.get(r.path[0]!) : r.root === "memory" ? byStep.get(memoryKeys.get(r.path[0]!) ?? "") : undefined;
      const field = producer && outputProblem(producer, r.path.slice(1), registry);
      if (field) issues.push({ code: ErrorCode.UNKNOWN_OUTPUT_FIELD, message: `step "${s.stepId}": ${r.at}: $ref "${r.raw}" ${field}`, stepId: s.stepId, path: r.at });
    }
    // statically over the value budget (literals, and context/memory named many times): it could only fail at run time
    const sized: [string, unknown][] = [["arguments", s.arguments]];
    if (s.rollback?.kind === "skill") sized.push(["rollback.arguments", s.rollback.arguments ?? {}]);
    if (s.fallback && "skillName" in s.fallback) sized.push(["fallback.arguments", s.fallback.arguments ?? {}]);
    if (s.fallback && "value" in s.fallback) sized.push(["fallback.value", { $literal: s.fallback.value }]);
    for (const [field, v] of sized) {
      if (staticArgumentBytes(v, { context: opts.context, memory: initialMemory }, budget) > budget) {
        const e = valueTooLarge(field, budget, { stepId: s.stepId, what: field === "fallback.value" ? "the value is" : "the resolved arguments are" });
        issues.push({ code: e.code, message: e.message, stepId: s.stepId, path: field });
      }
    }
    const skill = registry.get(s.skillName)!;
    // validate arguments now when nothing in them depends on other steps
    const resolvable = argRefs.every((r) => r.root === "context" ? opts.context !== undefined : r.root === "memory" ? !memoryKeys.has(r.path[0]!) && opts.memory !== undefined : false);
    if (resolvable && !issues.some((i) => i.stepId === s.stepId)) {
      let args: unknown;
      try {
        args = resolveArguments(s.arguments, { context: opts.context, memory: opts.memory ?? {}, steps: {} }, "arguments", { maxBytes: budget, stepId: s.stepId });
      } catch (e) {
        const code = (e as ToolchainError).code === ErrorCode.VALUE_TOO_LARGE ? ErrorCode.VALUE_TOO_LARGE : ErrorCode.INVALID_REFERENCE;
        issues.push({ code, message: code === ErrorCode.VALUE_TOO_LARGE ? (e as Error).message : `step "${s.stepId}": ${(e as Error).message}`, stepId: s.stepId });
        continue;
      }
      const r = skill.input.safeParse(args);
      if (!r.success) {
        issues.push({ code: ErrorCode.INVALID_ARGUMENTS, message: `step "${s.stepId}": arguments do not match ${s.skillName}: ${z.prettifyError(r.error).replace(/\n/g, "; ")}`, stepId: s.stepId, path: "arguments" });
      }
    }
    if (s.rollback?.kind === "delete_created_records" && !skill.createdRecords) {
      issues.push({ code: ErrorCode.NOT_COMPENSABLE, message: `step "${s.stepId}": rollback delete_created_records needs a skill that reports the records it creates; "${s.skillName}" does not`, stepId: s.stepId, path: "rollback" });
    }
    // strict rollback refuses side effects that cannot be undone
    if (plan.rollbackMode === "strict" && hasSideEffects(skill) && !s.acceptNoCompensation) {
      const undoable = s.rollback ? s.rollback.kind !== "none" : compensable(skill);
      if (!undoable) {
        issues.push({ code: ErrorCode.NOT_COMPENSABLE, message: `step "${s.stepId}": skill "${s.skillName}" has side effects and no compensation; strict rollback needs one (or acceptNoCompensation: true)`, stepId: s.stepId });
      }
    }
    // a fallback skill is an effect of its own: strict mode asks the same of it (the step's
    // rollback does not undo it; the fallback skill's own compensation does)
    const fbSkill = s.fallback && "skillName" in s.fallback ? registry.get(s.fallback.skillName) : undefined;
    if (fbSkill && plan.rollbackMode === "strict" && !compensable(fbSkill) && !s.acceptNoCompensation) {
      issues.push({ code: ErrorCode.NOT_COMPENSABLE, message: `step "${s.stepId}": fallback skill "${fbSkill.name}" has side effects and no compensation; strict rollback needs one (or acceptNoCompensation: true)`, stepId: s.stepId, path: "fallback.skillName" });
    }
    // a rollback runs when things already went wrong, with nobody asked: a skill that needs a
    // person's confirmation cannot be a compensation
    const rbSkill = s.rollback?.kind === "skill" ? registry.get(s.rollback.skillName) : undefined;
    if (rbSkill?.requiresConfirmation) {
      issues.push({ code: ErrorCode.CONFIRMATION_REQUIRED, message: `step "${s.stepId}": rollback skill "${rbSkill.name}" requires confirmation; a compensation runs unattended, so it must be a skill that does not ask`, stepId: s.stepId, path: "rollback.skillName" });
    }
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
    if (!env.isAncestor(target, stepId)) return `reads step "${target}", which is not a (transitive) dependency of "${stepId}"`;
    return undefined;
  }
  if (r.root === "memory") {
    const key = r.path[0]!;
    const producer = env.memoryKeys.get(key);
    if (producer) {
      return env.isAncestor(producer, stepId) ? undefined : `reads memory "${key}", saved by step "${producer}", which is not a (transitive) dependency of "${stepId}"`;
    }
    if (env.memory === undefined) return undefined;
    return readPath(env.memory, r.path).found ? undefined : `does not resolve in the run's memory`;
  }
  if (env.context === undefined) return undefined;
  return readPath(env.context, r.path).found ? undefined : `does not resolve in the run's context`;
}

export function topoSort(
  ids: readonly string[],
  deps: ReadonlyMap<string, readonly string[]>,
): { ok: true; order: string[] } | { ok: false; cycle: string[] } {
  const indeg = new Map<string, number>();
  const succ = new Map<string, string[]>();
  for (const id of ids) {
    indeg.set(id, deps.get(id)?.length ?? 0);
    succ.set(id, []);
  }
  for (const id of ids) for (const d of deps.get(id) ?? []) succ.get(d)!.push(id);
  const order: string[] = [];
  const queue = ids.filter((id) => indeg.get(id) === 0);
  for (let qi = 0; qi < queue.length; qi++) {
    const id = queue[qi]!;
    order.push(id);
    for (const s of succ.get(id)!) {
      const n = indeg.get(s)! - 1;
      indeg.set(s, n);
      if (n === 0) queue.push(s);
    }
  }
  if (order.length === ids.length) return { ok: true, order };
  // walk dependencies among the leftover nodes until one repeats: that is a cycle
  const left = new Set(ids.filter((id) => indeg.get(id)! > 0));
  let cur = ids.find((id) => left.has(id))!;
  const seen = new Map<string, number>();
  const path: string[] = [];
  while (!seen.has(cur)) {
    seen.set(cur, path.length);
    path.push(cur);
    cur = (deps.get(cur) ?? []).find((d) => left.has(d))!;
  }
  // path goes against the edges (node -> its dependency); report in execution direction
  const cycle = path.slice(seen.get(cur)!).reverse();
  // start at the step declared first, so the message is stable
  const declared = new Map(ids.map((id, i) => [id, i]));
  let start = 0;
  cycle.forEach((id, i) => {
    if (declared.get(id)! < declared.get(cycle[start]!)!) start = i;
  });
  const rotated = [...cycle.slice(start), ...cycle.slice(0, start)];
  return { ok: false, cycle: [...rotated, rotated[0]!] };
}
