/**
 * Plans at the runtime's boundary: admitted for their author (src/plan/admission.ts), validated
 * and compiled (also in slices, for servers), planned from a request, and turned into a new run's
 * record and graph input.
 */
import { randomUUID } from "node:crypto";
import { openRunTrace, workflowName } from "../telemetry/run-spans.js";
import { DEFAULT_WORKSPACE } from "../kernel/workspace.js";
import { rememberCompiled, type RuntimeEnv } from "../../graphs/env.js";
import { compilePlan, compilePlanAsync, type CompiledPlan } from "../plan/validate.js";
import {
  admitPlan,
  stepAsks,
  LIBRARY_AUTHOR,
  type Admission,
  type PlanAuthor,
  type PlanBudget,
} from "../plan/admission.js";
import { type PlanningOutcome } from "../planner/index.js";
import { SkillRegistry } from "../skills/registry.js";
import { type NewRunLease, type RunRow, type RunStore } from "../store/run-store.js";
import { assertStorable } from "../kernel/storable.js";
import { allowedSkillNames, newPlanRun, newRequestRun } from "./new-run.js";
import type { RunOptions } from "./options.js";

/** A validated plan and its admission (who wrote it, what was clamped). */
export type AdmittedPlan = CompiledPlan & { admission: Admission };

/** What plan preparation uses of the runtime. */
export interface PlanDeps {
  readonly registry: SkillRegistry;
  readonly env: RuntimeEnv;
  readonly store: RunStore;
  readonly allowSkill?: (name: string) => boolean;
  readonly planBudget: PlanBudget;
}

/** Admit (for its author) and validate only: throws PlanValidationError with a stable code. */
export function validatePlan(
  p: PlanDeps,
  plan: unknown,
  opts: Pick<RunOptions, "context" | "memory" | "allowSkill" | "author"> = {},
): AdmittedPlan {
  const vo = validateOptions(p, opts, plan);
  const a = admit(p, plan, opts.author);
  return { ...compilePlan(a.plan, vo), admission: a.admission };
}

/**
 * `validate` in slices of at most ~10 ms, giving the event loop back in between (servers: a
 * 10,000-step plan must not stall other requests). Pass the result as `RunOptions.compiled`.
 */
export async function validatePlanAsync(
  p: PlanDeps,
  plan: unknown,
  opts: Pick<RunOptions, "context" | "memory" | "allowSkill" | "author"> = {},
): Promise<AdmittedPlan> {
  const vo = validateOptions(p, opts, plan);
  const a = admit(p, plan, opts.author);
  return { ...(await compilePlanAsync(a.plan, vo)), admission: a.admission };
}

/** The plan as its author may run it (src/plan/admission.ts). */
function admit(p: PlanDeps, plan: unknown, author: PlanAuthor = LIBRARY_AUTHOR) {
  return admitPlan(plan, author, (n) => p.registry.get(n), p.env.planner.config, p.planBudget);
}

function validateOptions(p: PlanDeps, opts: Pick<RunOptions, "context" | "memory" | "allowSkill">, plan: unknown) {
  // values the run history cannot store are refused before anything else looks at them
  assertStorable(plan, "plan");
  if (opts.context !== undefined) assertStorable(opts.context, "context");
  if (opts.memory !== undefined) assertStorable(opts.memory, "memory");
  const [global, call] = [p.allowSkill, opts.allowSkill];
  const allowSkill = global && call ? (name: string) => global(name) && call(name) : (global ?? call);
  return { registry: p.registry, allowSkill, context: opts.context, memory: opts.memory };
}

/**
 * Plan a request without running anything: the same planner the graph's planner node uses.
 * Throws PLANNING_FAILED when no plan can be written (the fallback names what it understood).
 */
export async function planRequest(
  p: PlanDeps,
  request: string,
  opts: Pick<RunOptions, "context" | "memory" | "allowSkill" | "workspaceId"> & { signal?: AbortSignal } = {},
): Promise<PlanningOutcome> {
  const allowed = allowedSkillNames(p.registry, p.allowSkill, opts.allowSkill);
  const out = await p.env.planner.plan({
    request,
    context: opts.context ?? {},
    memory: opts.memory ?? {},
    allowSkill: allowed ? (n) => allowed.includes(n) : undefined,
    workspaceId: opts.workspaceId,
    signal: opts.signal,
  });
  return { ...out, asks: out.plan.steps.filter((st) => stepAsks(p.registry, st)).map((st) => st.stepId) };
}

/** The run's id and trace (a `create_run` span when tracing is on, its context stored with the run). */
function traced(opts: RunOptions, name: string): RunOptions {
  const runId = opts.runId ?? randomUUID();
  const t = openRunTrace({ name, runId, workspaceId: opts.workspaceId ?? DEFAULT_WORKSPACE, traceId: opts.traceId });
  return { ...opts, runId, traceId: t.traceId, ...(t.traceContext ? { traceContext: t.traceContext } : {}) };
}

export function prepareRequestRun(p: PlanDeps, request: string, given: RunOptions, lease?: NewRunLease) {
  const opts = traced(given, workflowName(undefined));
  const r = newRequestRun(
    request,
    opts,
    allowedSkillNames(p.registry, p.allowSkill, opts.allowSkill) ?? null,
    new Date(p.env.now()).toISOString(),
  );
  return { runId: r.runId, input: r.input, created: p.store.createRun(r.record, lease) };
}

export function preparePlanRun(p: PlanDeps, plan: unknown, opts: RunOptions, lease?: NewRunLease) {
  const compiled: AdmittedPlan =
    opts.compiled && "admission" in opts.compiled
      ? (opts.compiled as AdmittedPlan)
      : opts.compiled
        ? { ...opts.compiled, admission: admit(p, opts.compiled.plan, opts.author).admission }
        : validatePlan(p, plan, opts);
  const r = newPlanRun(compiled, traced(opts, workflowName(compiled.plan)), new Date(p.env.now()).toISOString());
  // the graph's nodes find it compiled (a big plan is not compiled again on the event loop)
  rememberCompiled(p.env, r.runId, compiled);
  return { runId: r.runId, input: r.input, created: p.store.createRun(r.record, lease) };
}

/**
 * The store a new run's first drive sees: the run row must exist before the drive takes the
 * lease, and a run recorded leased to this process (createRun's `lease`) answers the drive's
 * first take with that row: no second statement.
 */
export function leasedAtCreation(store: RunStore, created: Promise<RunRow | undefined>): RunStore {
  const wrapped: RunStore = Object.create(store);
  let first = true;
  wrapped.takeLease = async (id, owner, ttlMs) => {
    const row = await created;
    const mine = first && row?.leaseOwner === owner;
    first = false;
    return mine ? row : store.takeLease(id, owner, ttlMs);
  };
  return wrapped;
}
