/**
 * The model call: `ChatOpenAI` with structured output bound to the zod ToolChainPlan schema, so any
 * OpenAI-compatible server works (OpenAI, vLLM, Ollama, LM Studio, llama.cpp server). Returns the
 * model's raw plan (validation happens in the planner, so a repair round can quote the exact
 * issues) or a classified failure.
 */
import { AIMessage, HumanMessage, SystemMessage, type BaseMessage } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";
import { ToolChainPlanSchema } from "../plan/schema.js";
import type { FallbackReason, PlannerConfig } from "./config.js";
import type { PromptMessage } from "./prompt.js";

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
}

export interface ModelAnswer {
  /** The plan as the model wrote it (not validated). */
  plan: unknown;
  usage?: TokenUsage;
}

/** The model could not give a usable answer; `reason` says why (it becomes the fallback reason). */
export class ModelCallError extends Error {
  override readonly name = "ModelCallError";
  constructor(readonly reason: Exclude<FallbackReason, "not_configured" | "validation_failed">, message: string) {
    super(message);
  }
}

/** What the planner needs from a model: one structured answer per call. */
export interface PlanModel {
  readonly model: string;
  propose(messages: readonly PromptMessage[], signal?: AbortSignal): Promise<ModelAnswer>;
}

const toMessage = (m: PromptMessage): BaseMessage => (m.role === "system" ? new SystemMessage(m.content) : new HumanMessage(m.content));

/** A JSON object from assistant text, tolerating a Markdown fence around it. */
function parseJsonContent(content: unknown): unknown {
  const text = typeof content === "string" ? content : Array.isArray(content) ? content.map((c) => (typeof c === "string" ? c : (c as { text?: string }).text ?? "")).join("") : "";
  const fenced = /```(?:json)?\s*([\s\S]*?)```/.exec(text);
  const body = (fenced ? fenced[1]! : text).trim();
  if (!body) throw new ModelCallError("invalid_output", "the model answered with no plan (empty content and no tool call)");
  try {
    return JSON.parse(body);
  } catch {
    throw new ModelCallError("invalid_output", `the model's answer is not JSON: ${JSON.stringify(body.slice(0, 200))}`);
  }
}

function usageOf(raw: AIMessage): TokenUsage | undefined {
  const u = raw.usage_metadata;
  return u ? { inputTokens: u.input_tokens, outputTokens: u.output_tokens, totalTokens: u.total_tokens } : undefined;
}

/** Map what the OpenAI client threw to a fallback reason. */
export function classifyModelError(e: unknown, timeoutMs: number, timedOut: boolean): ModelCallError {
  if (e instanceof ModelCallError) return e;
  const err = e as { name?: string; status?: number; message?: string; code?: string };
  const msg = String(err?.message ?? e).slice(0, 500);
  if (timedOut || err?.name === "TimeoutError" || /timed? ?out/i.test(`${err?.name} ${msg}`)) {
    return new ModelCallError("timeout", `the model did not answer within ${timeoutMs} ms`);
  }
  if (typeof err?.status === "number") return new ModelCallError("http_error", `the model endpoint answered HTTP ${err.status}: ${msg}`);
  if (/connect|ECONNREFUSED|ENOTFOUND|EAI_AGAIN|fetch failed|socket/i.test(`${err?.name} ${err?.code} ${msg}`)) {
    return new ModelCallError("unreachable", `the model endpoint is unreachable: ${msg}`);
  }
  return new ModelCallError("invalid_output", `the model call failed: ${msg}`);
}

/** The configured chat model (any OpenAI-compatible server). */
export function chatModel(config: PlannerConfig & { model: string }): ChatOpenAI {
  return new ChatOpenAI({
    model: config.model,
    temperature: config.temperature,
    timeout: config.timeoutMs,
    maxRetries: config.maxRetries,
    // local servers need no key, but the client insists on one
    apiKey: config.apiKey ?? (config.baseURL ? "not-needed" : undefined),
    configuration: config.baseURL ? { baseURL: config.baseURL } : undefined,
  });
}

export class OpenAiPlanModel implements PlanModel {
  readonly model: string;
  private readonly runnable;

  constructor(private readonly config: PlannerConfig & { model: string }) {
    this.model = config.model;
    this.runnable = chatModel(config).withStructuredOutput(ToolChainPlanSchema, { name: "ToolChainPlan", method: config.method, includeRaw: true });
  }

  async propose(messages: readonly PromptMessage[], signal?: AbortSignal): Promise<ModelAnswer> {
    const timeout = AbortSignal.timeout(this.config.timeoutMs);
    const both = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let out: { raw: BaseMessage; parsed: unknown };
    try {
      out = (await this.runnable.invoke(messages.map(toMessage), { signal: both })) as { raw: BaseMessage; parsed: unknown };
    } catch (e) {
      if (signal?.aborted) throw e; // the run was cancelled: not a planner failure
      throw classifyModelError(e, this.config.timeoutMs, timeout.aborted);
    }
    const raw = out.raw as AIMessage;
    const usage = usageOf(raw);
    const call = raw.tool_calls?.[0];
    if (call) return { plan: call.args, usage };
    const bad = raw.invalid_tool_calls?.[0];
    if (bad) throw new ModelCallError("invalid_output", `the model's tool call arguments are not JSON: ${JSON.stringify(String(bad.args ?? "").slice(0, 200))}`);
    // json_schema / json mode: the plan is the content (the parser put it in `parsed` when it was valid)
    return { plan: raw.content ? parseJsonContent(raw.content) : out.parsed ?? parseJsonContent(raw.content), usage };
  }
}
