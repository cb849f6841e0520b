/**
 * One structured model call through ChatOpenAI (any OpenAI-compatible server), as real models and
 * servers behave: transient failures (HTTP 408/409/429/5xx) are retried with backoff or the
 * server's Retry-After, always inside the call's deadline; a stall is not retried and trips the
 * stall breaker; a refusal, a truncated answer and a content-filter stop are named as such; the
 * answer is read from the tool call or the content (prose, fences, double encoding tolerated), and
 * an unreadable one is returned with its parse error for the repair round. The provider's own error
 * text goes to `providerMessage` (the server log), never into the reason people see.
 */
import { recordUsage, SpanKind, traced } from "../telemetry/tool-spans.js";
import type { AIMessage, BaseMessage } from "@langchain/core/messages";
import { abortableSleep } from "../kernel/sleep.js";
import { ChatOpenAI } from "@langchain/openai";
import { storableText } from "../kernel/json-safety.js";
import type { FallbackReason, PlannerConfig, StructuredMethod } from "./config.js";
import { extractJsonObject, unwrapArguments } from "./extract.js";
import type { JsonSchema } from "./model-schema.js";
import { endpointKey, stallBreaker } from "./stall-breaker.js";

export type { TokenUsage } from "./info.js";
import type { TokenUsage } from "./info.js";

/** The model could not give a usable answer; `reason` says why (it becomes the fallback reason). */
export class ModelCallError extends Error {
  override readonly name = "ModelCallError";
  constructor(
    readonly reason: Exclude<FallbackReason, "not_configured" | "validation_failed">,
    message: string,
    /** What the provider said (may quote the operator's masked key): for the server log only. */
    readonly providerMessage?: string,
  ) {
    super(message);
  }
}

/** What the model answered: an object, or text that could not be read as one (and why). */
export type CallOutcome =
  | { kind: "value"; value: unknown; usage?: TokenUsage }
  | { kind: "unreadable"; error: string; text: string; usage?: TokenUsage };

export interface StructuredSpec {
  name: string;
  description: string;
  /** For function calling and JSON mode. */
  schema: JsonSchema;
  /** For `jsonSchema` (OpenAI strict structured outputs). */
  strictSchema: JsonSchema;
  /** Tells the wanted object from others in prose (e.g. a plan has `steps`). */
  prefer: (v: Record<string, unknown>) => boolean;
}

export type ModelConfig = Pick<
  PlannerConfig,
  "baseURL" | "apiKey" | "timeoutMs" | "method" | "maxRetries" | "temperature"
> & { model: string };

/** The configured chat model. Retries are ours (deadline-aware), so the client makes none. */
export function chatModel(config: ModelConfig): ChatOpenAI {
  return new ChatOpenAI({
    model: config.model,
    temperature: config.temperature,
    maxRetries: 0,
    // the refusal and finish_reason are read from the raw answer
    __includeRawResponse: true,
    // local servers need no key, but the client insists on one
    apiKey: config.apiKey ?? (config.baseURL ? "not-needed" : undefined),
    configuration: config.baseURL ? { baseURL: config.baseURL } : undefined,
  });
}

function bind(chat: ChatOpenAI, method: StructuredMethod, spec: StructuredSpec) {
  if (method === "functionCalling") {
    return chat.bindTools(
      [{ type: "function", function: { name: spec.name, description: spec.description, parameters: spec.schema } }],
      {
        tool_choice: { type: "function", function: { name: spec.name } },
      },
    );
  }
  if (method === "jsonSchema") {
    return chat.withConfig({
      response_format: {
        type: "json_schema",
        json_schema: { name: spec.name, description: spec.description, strict: true, schema: spec.strictSchema },
      },
    });
  }
  return chat.withConfig({ response_format: { type: "json_object" } });
}

const RETRYABLE_STATUS = (s: number) => s === 408 || s === 409 || s === 429 || s >= 500;
const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 8_000;

function statusText(status: number): string {
  if (status === 401 || status === 403) return `the model endpoint refused the credentials (HTTP ${status})`;
  if (status === 404) return "the model endpoint does not know the model (HTTP 404)";
  if (status === 429) return "the model endpoint is rate limiting (HTTP 429)";
  if (status >= 500) return `the model endpoint failed (HTTP ${status})`;
  return `the model endpoint refused the request (HTTP ${status})`;
}

function header(headers: unknown, name: string): string | undefined {
  if (!headers || typeof headers !== "object") return undefined;
  if (typeof (headers as Headers).get === "function") return (headers as Headers).get(name) ?? undefined;
  const v = (headers as Record<string, unknown>)[name];
  return typeof v === "string" ? v : undefined;
}

/** Retry-After (seconds or an HTTP date) or retry-after-ms, in ms; undefined when absent or unreadable. */
export function retryAfterMs(headers: unknown, now: number): number | undefined {
  const ms = Number(header(headers, "retry-after-ms"));
  if (Number.isFinite(ms) && ms >= 0 && header(headers, "retry-after-ms") !== undefined) return ms;
  const raw = header(headers, "retry-after");
  if (raw === undefined) return undefined;
  const secs = Number(raw);
  if (Number.isFinite(secs) && secs >= 0) return secs * 1000;
  const at = Date.parse(raw);
  return Number.isFinite(at) ? Math.max(0, at - now) : undefined;
}

const usageOf = (m: AIMessage): TokenUsage | undefined => {
  const u = m.usage_metadata;
  return u ? { inputTokens: u.input_tokens, outputTokens: u.output_tokens, totalTokens: u.total_tokens } : undefined;
};
const quote = (s: string, n = 300) => JSON.stringify(storableText(s.length > n ? `${s.slice(0, n)}…` : s));

/** What the model answered, read as the spec's object. Throws ModelCallError for refusals and truncation. */
export function readAnswer(m: AIMessage, spec: StructuredSpec): CallOutcome {
  const usage = usageOf(m);
  const raw = m.additional_kwargs?.__raw_response as
    { choices?: { finish_reason?: string; message?: { refusal?: string | null } }[] } | undefined;
  const choice = raw?.choices?.[0];
  const finish = choice?.finish_reason ?? (m.response_metadata?.finish_reason as string | undefined);
  const refusal = choice?.message?.refusal ?? (m.additional_kwargs?.refusal as string | undefined);
  if (typeof refusal === "string" && refusal.trim() !== "")
    throw new ModelCallError("refused", `the model refused: ${quote(refusal)}`);
  if (finish === "length")
    throw new ModelCallError(
      "truncated",
      `the answer was cut off at the token limit (finish_reason "length"${usage ? `, ${usage.outputTokens} output tokens` : ""})`,
    );
  if (finish === "content_filter")
    throw new ModelCallError(
      "refused",
      'the answer was stopped by the provider\'s content filter (finish_reason "content_filter")',
    );
  const text =
    typeof m.content === "string"
      ? m.content
      : Array.isArray(m.content)
        ? m.content.map((c) => (typeof c === "string" ? c : ((c as { text?: string }).text ?? ""))).join("")
        : "";
  const call = m.tool_calls?.[0];
  const got = call
    ? unwrapArguments(call.args, spec.prefer)
    : m.invalid_tool_calls?.[0]
      ? extractJsonObject(String(m.invalid_tool_calls[0].args ?? ""), spec.prefer)
      : text.trim()
        ? extractJsonObject(text, spec.prefer)
        : { ok: false as const, error: "the answer has no content and no tool call" };
  if (got.ok) return { kind: "value", value: got.value, usage };
  const shown = call
    ? JSON.stringify(call.args)
    : m.invalid_tool_calls?.[0]
      ? String(m.invalid_tool_calls[0].args ?? "")
      : text;
  return { kind: "unreadable", error: got.error, text: shown, usage };
}

export interface CallOptions {
  /** Aborts the call (a cancelled run): rethrown as is, not a model failure. */
  signal?: AbortSignal;
  now?: () => number;
}

/** One answer within `config.timeoutMs`, transient failures retried inside it. */
export async function callStructured(
  chat: ChatOpenAI,
  config: ModelConfig,
  spec: StructuredSpec,
  messages: BaseMessage[],
  opts: CallOptions = {},
): Promise<CallOutcome> {
  const now = opts.now ?? Date.now;
  const deadline = now() + config.timeoutMs;
  const key = endpointKey(config);
  const runnable = bind(chat, config.method, spec);
  let attempts = 0;
  for (;;) {
    attempts++;
    const left = deadline - now();
    if (left <= 0) throw new ModelCallError("timeout", `the model did not answer within ${config.timeoutMs} ms`);
    const timer = AbortSignal.timeout(left);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timer]) : timer;
    let failure: ModelCallError;
    let waitMs: number | undefined;
    try {
      const m = await traced(
        () => ({
          name: `chat ${config.model}`,
          kind: SpanKind.CLIENT,
          attributes: {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": config.model,
            "toolchain.planner.call_attempt": attempts,
          },
        }),
        async () => (await runnable.invoke(messages, { signal })) as AIMessage,
        (r, span) => {
          recordUsage(span, usageOf(r), r.response_metadata?.model_name as string | undefined);
          const finish = r.response_metadata?.finish_reason;
          if (typeof finish === "string") span.setAttribute("gen_ai.response.finish_reasons", [finish]);
        },
      );
      stallBreaker.reset(key);
      return readAnswer(m, spec);
    } catch (e) {
      if (opts.signal?.aborted) throw e; // the run was cancelled: not a planner failure
      if (e instanceof ModelCallError) throw e;
      const err = e as {
        name?: string;
        status?: number;
        message?: string;
        code?: string;
        headers?: unknown;
        constructor?: { name?: string };
      };
      const msg = String(err?.message ?? e).slice(0, 2_000);
      if (timer.aborted || err?.name === "TimeoutError") {
        stallBreaker.trip(key, now());
        throw new ModelCallError("timeout", `the model did not answer within ${config.timeoutMs} ms`);
      }
      stallBreaker.reset(key);
      if (err?.constructor?.name === "LengthFinishReasonError" || /length limit was reached/.test(msg)) {
        throw new ModelCallError("truncated", 'the answer was cut off at the token limit (finish_reason "length")');
      }
      if (err?.constructor?.name === "ContentFilterFinishReasonError" || /content filter/.test(msg)) {
        throw new ModelCallError(
          "refused",
          'the answer was stopped by the provider\'s content filter (finish_reason "content_filter")',
        );
      }
      // the client's own JSON.parse of a json_schema answer: the repair round gets the parse error
      if (e instanceof SyntaxError && /structured output/i.test(msg))
        return { kind: "unreadable", error: "the answer is not valid JSON for the response schema", text: "" };
      if (typeof err?.status === "number") {
        const status = err.status;
        const more = attempts > 1 ? ` after ${attempts} attempts` : "";
        failure = new ModelCallError(
          status === 429 ? "rate_limited" : "http_error",
          `${statusText(status)}${more}`,
          msg,
        );
        if (!RETRYABLE_STATUS(status) || attempts > config.maxRetries) throw failure;
        const asked = retryAfterMs(err.headers, now());
        if (asked !== undefined && now() + asked >= deadline) {
          throw new ModelCallError(
            failure.reason,
            `${failure.message}; it asked to retry after ${Math.ceil(asked / 1000)} s, beyond the planner's deadline of ${config.timeoutMs} ms`,
            msg,
          );
        }
        waitMs = asked ?? Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** (attempts - 1)) * (0.5 + Math.random() / 2);
      } else if (
        /connect|ECONNREFUSED|ENOTFOUND|EAI_AGAIN|fetch failed|socket/i.test(`${err?.name} ${err?.code} ${msg}`)
      ) {
        const code = /E[A-Z_]{4,}/.exec(`${err?.code ?? ""} ${msg}`)?.[0];
        throw new ModelCallError("unreachable", `the model endpoint is unreachable${code ? ` (${code})` : ""}`, msg);
      } else {
        throw new ModelCallError("invalid_output", "the model call failed with an unexpected answer", msg);
      }
    }
    if (now() + waitMs >= deadline)
      throw new ModelCallError(
        failure.reason,
        `${failure.message}; no time left to retry within ${config.timeoutMs} ms`,
        failure.providerMessage,
      );
    await abortableSleep(waitMs, opts.signal);
  }
}
