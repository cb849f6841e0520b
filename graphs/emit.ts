/** Lifecycle events leave every node through LangGraph's custom stream (config.writer). */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { EVENT_TAG, type EmittedEvent, type EventType } from "../src/kernel/events.js";
import type { RuntimeEnv } from "./env.js";

export type Emit = (type: EventType, stepId: string | undefined, data?: Record<string, unknown>, keySuffix?: string) => void;

export function emitter(config: LangGraphRunnableConfig, env: Pick<RuntimeEnv, "now">): Emit {
  const write = config.writer;
  return (type, stepId, data = {}, keySuffix) => {
    if (!write) return;
    const ev: EmittedEvent = {
      type,
      at: new Date(env.now()).toISOString(),
      data,
      key: [type, stepId ?? "", keySuffix ?? ""].join(":"),
    };
    if (stepId !== undefined) ev.stepId = stepId;
    write({ [EVENT_TAG]: ev });
  };
}
