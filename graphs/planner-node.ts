/**
 * The planner node. Today it passes a given plan through (validated again, so a plan edited in
 * Studio cannot skip validation); the LLM planner will write `plan` from `request` here.
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { toStepError } from "../src/kernel/errors.js";
import { EventType } from "../src/kernel/events.js";
import { compilePlanAsync } from "../src/plan/validate.js";
import { emitter } from "./emit.js";
import { compiledFor, type RuntimeEnv } from "./env.js";
import type { RunState, RunUpdate } from "./state.js";

export function makePlannerNode(env: RuntimeEnv) {
  return async function planner(state: RunState, config: LangGraphRunnableConfig): Promise<RunUpdate> {
    const emit = emitter(config, env);
    emit(EventType.planning_started, undefined, { source: "given" });
    try {
      const compiled = await compiledFor(env, state.runId, state.plan, () => compilePlanAsync(state.plan, { registry: env.registry, context: state.context, memory: state.memory }));
      emit(EventType.planning_completed, undefined, { steps: compiled.steps.length });
      return { plan: compiled.plan, status: "running", updatedAt: new Date(env.now()).toISOString() };
    } catch (e) {
      const error = toStepError(e);
      return { status: "failed", error, updatedAt: new Date(env.now()).toISOString() };
    }
  };
}
