/**
 * The planner's model: ChatOpenAI bound to the model-facing plan schema (`model-schema.ts`), so any
 * OpenAI-compatible server works (OpenAI, vLLM, Ollama, LM Studio, llama.cpp server). Returns the
 * model's raw plan (validation happens in the planner, so a repair round can quote the exact
 * issues), an answer it could not read (with the parse error, for the repair round), or a
 * classified failure (`ModelCallError`).
 */
import { HumanMessage, SystemMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatOpenAI } from "@langchain/openai";
import type { PlannerConfig } from "./config.js";
import { looksLikePlan } from "./extract.js";
import { callStructured, chatModel, type StructuredSpec, type TokenUsage } from "./model-call.js";
import { modelPlanSchema } from "./model-schema.js";
import type { PromptMessage } from "./prompt.js";

export { ModelCallError, chatModel, type TokenUsage } from "./model-call.js";

/** What the model answered: a plan as it wrote it (not validated), or text that is not one. */
export type ModelAnswer =
  { plan: unknown; usage?: TokenUsage } | { unreadable: string; text: string; usage?: TokenUsage };

/** What the planner needs from a model: one structured answer per call. */
export interface PlanModel {
  readonly model: string;
  /** `skills`: the names the plan may use (the schema's enum). */
  propose(messages: readonly PromptMessage[], signal?: AbortSignal, skills?: readonly string[]): Promise<ModelAnswer>;
}

const toMessage = (m: PromptMessage): BaseMessage =>
  m.role === "system" ? new SystemMessage(m.content) : new HumanMessage(m.content);

export const PLAN_TOOL = {
  name: "ToolChainPlan",
  description: "A tool-chain plan: a DAG of steps, each calling one skill of the manifest",
};

/** The structured-output spec of a plan for these skills. */
export function planSpec(skills: readonly string[]): StructuredSpec {
  return {
    ...PLAN_TOOL,
    schema: modelPlanSchema(skills, false),
    strictSchema: modelPlanSchema(skills, true),
    prefer: looksLikePlan,
  };
}

export class OpenAiPlanModel implements PlanModel {
  readonly model: string;
  private readonly chat: ChatOpenAI;

  constructor(private readonly config: PlannerConfig & { model: string }) {
    this.model = config.model;
    this.chat = chatModel(config);
  }

  async propose(
    messages: readonly PromptMessage[],
    signal?: AbortSignal,
    skills: readonly string[] = [],
  ): Promise<ModelAnswer> {
    const out = await callStructured(this.chat, this.config, planSpec(skills), messages.map(toMessage), { signal });
    return out.kind === "value"
      ? { plan: out.value, usage: out.usage }
      : { unreadable: out.error, text: out.text, usage: out.usage };
  }
}
