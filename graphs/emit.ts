/**
 * Lifecycle events leave every node for the drive's event sink when a drive of this process
 * executes the run (src/kernel/controls.ts: a direct call, no stream machinery per event), else
 * through LangGraph's custom stream (config.writer: the LangGraph server, Studio).
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { EVENT_TAG, eventKey, type EmittedEvent, type EventType } from "../src/kernel/events.js";
import type { RuntimeEnv } from "./env.js";
import { ridesOf } from "../src/kernel/node-rides.js";

/** Where LangGraph puts a task's id in its config (CONFIG_KEY_TASK_ID, not exported by the package). */
const TASK_ID_KEY = "__pregel_task_id";
import type { RunState } from "./state.js";
import { isoAt } from "../src/kernel/iso-time.js";

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

/** The keys of the events a node emitted (eventsBeforeWrites), carried on the config it runs with. */
const EMITTED = Symbol("emittedKeys");
type Capturing = LangGraphRunnableConfig & { [EMITTED]?: string[] };

/** Where a node's events go: the drive's sink, else the custom stream, else nowhere (no writer). */
function outlet(config: LangGraphRunnableConfig, env: Pick<RuntimeEnv, "controls">) {
  const runId = config.configurable?.thread_id;
  const sink = typeof runId === "string" ? env.controls.eventSink(runId) : undefined;
  if (sink) return sink;
  const write = config.writer;
  return write ? (ev: EmittedEvent) => write({ [EVENT_TAG]: ev }) : undefined;
}

export function emitter(
  config: LangGraphRunnableConfig,
  env: Pick<RuntimeEnv, "now" | "controls">,
  gens?: Generations,
): Emit {
  const out = outlet(config, env);
  const keys = (config as Capturing)[EMITTED];
  return (type, stepId, data = {}, keySuffix) => {
    if (!out) return;
    const ev: EmittedEvent = {
      type,
      at: isoAt(env.now()),
      data,
      key: eventKey(type, stepId, keySuffix, generationOf(gens, stepId)),
    };
    if (stepId !== undefined) ev.stepId = stepId;
    keys?.push(ev.key);
    out(ev);
  };
}

/**
 * A node whose events are stored before its writes. The driver appends events after the checkpoint
 * writes they report (src/runtime/write-barrier.ts), so a process killed after a node's writes were
 * saved and before its last event batch lost those events for good: the node never runs again, and
 * the drive's backfill rebuilds only the lifecycle events a final state implies, not, say, the
 * `step_confirmed` of an operator's rollback decision or `rollback_completed` (the crash-point suite
 * found both, killed at the `checkpoint:putWrites` of the node that then ended runs). One append
 * round trip per node run, or none where they ride in the writes' statement.
 */
export function eventsBeforeWrites<S, U>(
  env: Pick<RuntimeEnv, "controls">,
  node: (state: S, config: LangGraphRunnableConfig) => Promise<U>,
): (state: S, config: LangGraphRunnableConfig) => Promise<U> {
  return async (state, config) => {
    const runId = config.configurable?.thread_id;
    if (typeof runId !== "string" || !outlet(config, env)) return node(state, config);
    const keys: string[] = [];
    const out = await node(state, { ...config, [EMITTED]: keys } as Capturing);
    // where the drive can, they are stored with the writes, in their statement (src/runtime/events-ride.ts)
    const taskId = config.configurable?.[TASK_ID_KEY];
    if (typeof taskId === "string" && ridesOf(config.configurable)?.offer(taskId, keys)) return out;
    await env.controls.eventsStored(runId, keys);
    return out;
  };
}
