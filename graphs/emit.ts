/** Lifecycle events leave every node through LangGraph's custom stream (config.writer). */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { EVENT_TAG, eventKey, isTaggedEvent, type EmittedEvent, type EventType } from "../src/kernel/events.js";
import type { RuntimeEnv } from "./env.js";
import type { RunState } from "./state.js";

export { eventKey };

export type Emit = (
  type: EventType,
  stepId: string | undefined,
  data?: Record<string, unknown>,
  keySuffix?: string,
) => void;

/** Which redrive an event belongs to: a step's (set when a redrive reset it), else the run's latest. */
export type Generations = Partial<Pick<RunState, "steps" | "redrives">>;

export function generationOf(g: Generations | undefined, stepId: string | undefined): number {
  if (!g) return 0;
  return stepId !== undefined ? (g.steps?.[stepId]?.redrive ?? 0) : (g.redrives?.length ?? 0);
}

export function emitter(config: LangGraphRunnableConfig, env: Pick<RuntimeEnv, "now">, gens?: Generations): Emit {
  const write = config.writer;
  return (type, stepId, data = {}, keySuffix) => {
    if (!write) return;
    const ev: EmittedEvent = {
      type,
      at: new Date(env.now()).toISOString(),
      data,
      key: eventKey(type, stepId, keySuffix, generationOf(gens, stepId)),
    };
    if (stepId !== undefined) ev.stepId = stepId;
    write({ [EVENT_TAG]: ev });
  };
}

/**
 * A node whose events are stored before its writes. The driver appends events after the checkpoint
 * writes they report (src/runtime/write-barrier.ts), so a process killed after a node's writes were
 * saved and before its last event batch lost those events for good: the node never runs again, and
 * the drive's backfill rebuilds only the lifecycle events a final state implies, not, say, the
 * `step_confirmed` of an operator's rollback decision or `rollback_completed` (the crash-point suite
 * found both, killed at the `checkpoint:putWrites` of the node that then ended runs). One append round trip per node run.
 */
export function eventsBeforeWrites<S, U>(
  env: Pick<RuntimeEnv, "controls">,
  node: (state: S, config: LangGraphRunnableConfig) => Promise<U>,
): (state: S, config: LangGraphRunnableConfig) => Promise<U> {
  return async (state, config) => {
    const write = config.writer;
    const runId = config.configurable?.thread_id;
    if (!write || typeof runId !== "string") return node(state, config);
    const keys: string[] = [];
    const writer = (chunk: unknown) => {
      if (isTaggedEvent(chunk)) keys.push(chunk[EVENT_TAG].key);
      write(chunk);
    };
    const out = await node(state, { ...config, writer });
    await env.controls.eventsStored(runId, keys);
    return out;
  };
}
