/**
 * Planner configuration: which model (if any) writes plans, and the limits the runtime applies
 * to what it writes. Read from the environment by `plannerConfigFromEnv`; every field can be given
 * in code (`createRuntime({ planner: {...} })`).
 */
/** How the plan schema is bound to the model (see README "Planner"). */
export type StructuredMethod = "functionCalling" | "jsonSchema" | "jsonMode";
const METHODS: readonly StructuredMethod[] = ["functionCalling", "jsonSchema", "jsonMode"];

export interface PlannerConfig {
  /** The model name; absent: no model is configured and the fallback planner writes every plan. */
  model?: string;
  /** OpenAI-compatible endpoint (`…/v1`); absent: api.openai.com. */
  baseURL?: string;
  apiKey?: string;
  /**
   * The deadline of one model answer, its retries included (a repair round gets another). A call
   * that stalls until it is reached is not retried, and the split skill does not ask the same
   * endpoint again while it stalls (see `stall-breaker.ts`). @default 60000
   */
  timeoutMs: number;
  /** functionCalling works with OpenAI, vLLM, Ollama, LM Studio and llama.cpp server. @default "functionCalling" */
  method: StructuredMethod;
  /**
   * Retries of an answer that failed transiently (HTTP 408, 409, 429, 5xx), with exponential backoff
   * or the server's Retry-After, always inside `timeoutMs`. @default 2
   */
  maxRetries: number;
  /** @default 0 */
  temperature: number;
  /** Upper bound for a model-proposed `retry.maxAttempts` (skills that may be repeated). @default 3 */
  maxAttempts: number;
  /** Upper bound for a model-proposed `timeoutMs`. @default 300000 */
  maxStepTimeoutMs: number;
}

export const PLANNER_DEFAULTS = {
  timeoutMs: 60_000,
  method: "functionCalling",
  maxRetries: 2,
  temperature: 0,
  maxAttempts: 3,
  maxStepTimeoutMs: 300_000,
} as const satisfies Omit<PlannerConfig, "model" | "baseURL" | "apiKey">;

export type PlannerOptions = Partial<PlannerConfig>;

function positiveInt(name: string, raw: string | undefined, fallback: number, min = 1): number {
  if (raw === undefined || raw.trim() === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new TypeError(`Expected ${name} to be an integer >= ${min}, got "${raw}"`);
  return n;
}

/**
 * `TOOLCHAIN_PLANNER_MODEL` (required for the model planner), `OPENAI_BASE_URL`, `OPENAI_API_KEY`,
 * `TOOLCHAIN_PLANNER_TIMEOUT_MS`, `TOOLCHAIN_PLANNER_METHOD`, `TOOLCHAIN_PLANNER_MAX_RETRIES`.
 * A local server usually needs no key: a placeholder is sent when only the base URL is set.
 */
export function plannerConfigFromEnv(env: NodeJS.ProcessEnv = process.env): PlannerOptions {
  const method = env.TOOLCHAIN_PLANNER_METHOD?.trim();
  if (method && !METHODS.includes(method as StructuredMethod)) {
    throw new TypeError(`Expected TOOLCHAIN_PLANNER_METHOD to be one of ${METHODS.join(", ")}, got "${method}"`);
  }
  const out: PlannerOptions = {
    timeoutMs: positiveInt(
      "TOOLCHAIN_PLANNER_TIMEOUT_MS",
      env.TOOLCHAIN_PLANNER_TIMEOUT_MS,
      PLANNER_DEFAULTS.timeoutMs,
    ),
    maxRetries: positiveInt(
      "TOOLCHAIN_PLANNER_MAX_RETRIES",
      env.TOOLCHAIN_PLANNER_MAX_RETRIES,
      PLANNER_DEFAULTS.maxRetries,
      0,
    ),
  };
  if (env.TOOLCHAIN_PLANNER_MODEL?.trim()) out.model = env.TOOLCHAIN_PLANNER_MODEL.trim();
  if (env.OPENAI_BASE_URL?.trim()) out.baseURL = env.OPENAI_BASE_URL.trim();
  if (env.OPENAI_API_KEY?.trim()) out.apiKey = env.OPENAI_API_KEY.trim();
  if (method) out.method = method as StructuredMethod;
  return out;
}

export function resolvePlannerConfig(opts: PlannerOptions = {}): PlannerConfig {
  return { ...PLANNER_DEFAULTS, ...Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined)) };
}

/**
 * Why the model could not be used: `reason` is stable, `detail` is for people (never the provider's
 * own error text, which stays in the server log).
 * - `refused`: the model declined (OpenAI `message.refusal`); the detail quotes its text.
 * - `truncated`: the answer stopped at the token limit (`finish_reason: "length"`).
 * - `rate_limited`: HTTP 429 until the deadline (or a Retry-After beyond it).
 * - `invalid_output`: the answer could not be read as JSON, also after a repair round.
 * - `validation_failed`: the plan stayed invalid after a repair round.
 */
export const FALLBACK_REASONS = [
  "not_configured",
  "timeout",
  "unreachable",
  "http_error",
  "rate_limited",
  "refused",
  "truncated",
  "invalid_output",
  "validation_failed",
] as const;
export type FallbackReason = (typeof FALLBACK_REASONS)[number];
