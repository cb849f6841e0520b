/**
 * What the graph's nodes need from the runtime that is not run state: the skills, live controls,
 * a clock and randomness (injectable for tests), and a logger.
 */
import type { SkillLogger } from "../src/skills/contract.js";
import type { SkillRegistry } from "../src/skills/registry.js";
import { RunControls } from "../src/runtime/controls.js";

export interface RuntimeEnv {
  registry: SkillRegistry;
  controls: RunControls;
  now(): number;
  random(): number;
  logger(runId: string, stepId?: string): SkillLogger;
}

export const silentLogger: SkillLogger = { debug() {}, info() {}, warn() {}, error() {} };

export function defaultEnv(registry: SkillRegistry, over: Partial<RuntimeEnv> = {}): RuntimeEnv {
  return {
    registry,
    controls: new RunControls(),
    now: () => Date.now(),
    random: Math.random,
    logger: () => silentLogger,
    ...over,
  };
}
