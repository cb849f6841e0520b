/**
 * What the graph's nodes need from the runtime that is not run state: the skills, live controls,
 * a clock and randomness (injectable for tests), and a logger.
 */
import type { SkillLogger } from "../src/skills/contract.js";
import { runLogger } from "../src/telemetry/log.js";
import { planBudgetFromEnv, type PlanBudget } from "../src/plan/admission.js";
import { parseApprovalDefaults, type ApprovalDefaults } from "../src/kernel/approval-policy.js";
import type { SkillRegistry } from "../src/skills/registry.js";
import { LRUCache } from "lru-cache";
import type { CompiledPlan } from "../src/plan/validate.js";
import { RunControls } from "../src/kernel/controls.js";
import type { IntentLog } from "../src/store/intent-log.js";
import { Planner, plannerConfigFromEnv } from "../src/planner/index.js";
import type { RunLimits } from "../src/kernel/limits.js";

export interface RuntimeEnv {
  registry: SkillRegistry;
  controls: RunControls;
  /** Durable markers written before non-idempotent effects (crash safety). */
  intents: IntentLog;
  now(): number;
  random(): number;
  logger(runId: string, stepId?: string): SkillLogger;
  /**
   * Tasks one scheduler-node execution launches before it drains and hands over to a fresh
   * execution. LangGraph 1.7.3 rescans a node's task writes on every new task (cost grows with their
   * number; the patch carried in patches/ indexes them), so very long runs are cut into segments; a
   * boundary waits for running steps, so segments are large enough that plans of up to 1,000 steps
   * never pay it. @default 1000
   */
  segmentTasks: number;
  /** Writes plans for runs started from a request (the planner node). */
  planner: Planner;
  /**
   * A compensation attempt of a step without `timeoutMs` is abandoned after this long (TIMEOUT,
   * retried per the step's policy), so a hung compensation cannot hold a run forever. @default 60000
   */
  compensationTimeoutMs: number;
  /** Workspace default approval policies (src/kernel/approval-policy.ts): waits read their expiry from them too. */
  approvalDefaults?: ApprovalDefaults;
  /** What a model- or agent-written plan may ask for (src/plan/admission.ts). @default planBudgetFromEnv() */
  planBudget: PlanBudget;
  /**
   * Serial keys, resources and parallelSafe across runs (and processes, on Postgres). Absent: they
   * hold within each run only (the bare graph, e.g. in Studio).
   */
  limits?: RunLimits;
  /**
   * Compiled plans by run (a run's plan does not change once planned), least recently used
   * evicted first, bounded by estimated bytes (`compiledPlanBytes`), not by count: one tenant's
   * large plans cannot exhaust the heap. Eviction only costs a recompilation.
   */
  compiledPlans: LRUCache<string, CachedPlan>;
}

export interface CachedPlan {
  json: string;
  compiled: CompiledPlan;
  /**
   * The last plan object found equal to `json`: a node executed again in the same drive gets the
   * same state object, so it is not serialized again to compare (plans are never changed in place).
   */
  seen?: unknown;
  /** `json` is the compiled plan's own (defaults applied): a plan equal to it needs no rewrite. */
  canonical: boolean;
}

/** @default 64 MiB */
export const DEFAULT_COMPILED_PLAN_BYTES = 64 * 1024 * 1024;

/** Estimated heap bytes of a compiled plan: its JSON twice (UTF-16) for the parsed plan, the same for indexes and the key. */
export const compiledPlanBytes = (c: CachedPlan): number => Math.max(1, c.json.length * 4);

export function compiledPlanCache(maxBytes = DEFAULT_COMPILED_PLAN_BYTES): LRUCache<string, CachedPlan> {
  return new LRUCache<string, CachedPlan>({ maxSize: Math.max(1, maxBytes), sizeCalculation: compiledPlanBytes });
}

/** Compile a run's plan once per process, not once per node execution. */
export async function compiledFor(
  env: RuntimeEnv,
  runId: string,
  plan: unknown,
  compile: () => Promise<CompiledPlan>,
): Promise<CompiledPlan> {
  const hit = env.compiledPlans.get(runId);
  if (hit && (hit.seen === plan || hit.compiled.plan === plan)) return hit.compiled;
  const json = JSON.stringify(plan);
  if (hit && hit.json === json) {
    hit.seen = plan;
    return hit.compiled;
  }
  const compiled = await compile();
  // a plan larger than the whole cache is not kept (LRUCache refuses it)
  env.compiledPlans.set(runId, { json, compiled, seen: plan, canonical: JSON.stringify(compiled.plan) === json });
  return compiled;
}

/**
 * `plan` is already its run's compiled plan (equal to it, defaults applied): a node accepting it
 * writes `plan` itself back, which changes nothing and is dropped (graphs/changes-only.ts), instead
 * of an equal copy stored once more.
 */
export function compiledAs(env: RuntimeEnv, runId: string, plan: unknown): boolean {
  const hit = env.compiledPlans.peek(runId);
  return !!hit && (hit.compiled.plan === plan || (hit.canonical && hit.seen === plan));
}

/** Seed the cache with a plan compiled (and validated) at the boundary, so the graph does not compile it again. */
export function rememberCompiled(env: RuntimeEnv, runId: string, compiled: CompiledPlan): void {
  env.compiledPlans.set(runId, { json: JSON.stringify(compiled.plan), compiled, canonical: true });
}

export const silentLogger: SkillLogger = { debug() {}, info() {}, warn() {}, error() {} };

export function defaultEnv(registry: SkillRegistry, over: Partial<RuntimeEnv> = {}): RuntimeEnv {
  return {
    registry,
    controls: new RunControls(),
    intents: memoryIntents(),
    now: () => Date.now(),
    random: Math.random,
    logger: (runId, stepId) => runLogger(runId, stepId),
    segmentTasks: 1_000,
    compensationTimeoutMs: 60_000,
    planBudget: over.planBudget ?? planBudgetFromEnv(),
    ...over,
    approvalDefaults: over.approvalDefaults ?? parseApprovalDefaults(process.env.TOOLCHAIN_APPROVAL_DEFAULTS),
    compiledPlans: over.compiledPlans ?? compiledPlanCache(),
    // configured from the environment unless given (LangGraph Studio, the CLI, the server)
    planner: over.planner ?? new Planner({ registry, config: plannerConfigFromEnv(), now: over.now }),
  };
}

function memoryIntents(): IntentLog {
  const seen = new Set<string>();
  return {
    async claimIntent(runId, stepId, attempt) {
      const k = `${runId}\u0000${stepId}\u0000${attempt}`;
      if (seen.has(k)) return false;
      seen.add(k);
      return true;
    },
    async hasIntent(runId, stepId, attempt) {
      return seen.has(`${runId}\u0000${stepId}\u0000${attempt}`);
    },
  };
}
