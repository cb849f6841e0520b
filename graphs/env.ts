/**
 * What the graph's nodes need from the runtime that is not run state: the skills, live controls,
 * a clock and randomness (injectable for tests), and a logger.
 */
import type { SkillLogger } from "../src/skills/contract.js";
import type { SkillRegistry } from "../src/skills/registry.js";
import { RunControls } from "../src/runtime/controls.js";
import type { IntentLog } from "../src/store/run-store.js";

export interface RuntimeEnv {
  registry: SkillRegistry;
  controls: RunControls;
  /** Durable markers written before non-idempotent effects (crash safety). */
  intents: IntentLog;
  now(): number;
  random(): number;
  logger(runId: string, stepId?: string): SkillLogger;
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
  };
}
