/**
 * What the graph's nodes need from the runtime that is not run state: the skills, live controls,
 * a clock and randomness (injectable for tests), and a logger.
 */
import type { SkillLogger } from "../src/skills/contract.js";
import type { SkillRegistry } from "../src/skills/registry.js";
import type { CompiledPlan } from "../src/plan/validate.js";
import { RunControls } from "../src/runtime/controls.js";
import type { IntentLog } from "../src/store/intent-log.js";
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
   * execution. LangGraph rescans a node's task writes on every new task (cost grows with their
   * number), so very long runs are cut into segments; a boundary waits for running steps, so
   * segments are large enough that plans of up to 1,000 steps never pay it. @default 1000
   */
  segmentTasks: number;
  /**
   * Serial keys, resources and parallelSafe across runs (and processes, on Postgres). Absent: they
   * hold within each run only (the bare graph, e.g. in Studio).
   */
  limits?: RunLimits;
  /** Compiled plans by run (a run's plan does not change once planned). */
  compiledPlans: Map<string, { json: string; compiled: CompiledPlan }>;
}

/** Compile a run's plan once per process, not once per node execution. */
export function compiledFor(env: RuntimeEnv, runId: string, plan: unknown, compile: () => CompiledPlan): CompiledPlan {
  const json = JSON.stringify(plan);
  const hit = env.compiledPlans.get(runId);
  if (hit && hit.json === json) return hit.compiled;
  const compiled = compile();
  if (env.compiledPlans.size >= 1_000) env.compiledPlans.delete(env.compiledPlans.keys().next().value!);
  env.compiledPlans.set(runId, { json, compiled });
  return compiled;
}

export const silentLogger: SkillLogger = { debug() {}, info() {}, warn() {}, error() {} };

export function defaultEnv(registry: SkillRegistry, over: Partial<RuntimeEnv> = {}): RuntimeEnv {
  return {
    registry,
    controls: new RunControls(),
    intents: memoryIntents(),
    now: () => Date.now(),
    random: Math.random,
    logger: () => silentLogger,
    segmentTasks: 1_000,
    compiledPlans: new Map(),
    ...over,
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
