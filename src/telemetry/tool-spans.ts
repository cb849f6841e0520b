/**
 * Spans around work inside a run (GenAI conventions, SEMCONV_VERSION): `execute_tool <skill>` per
 * skill execution (a step attempt, a retry, a fallback attempt, a rollback skill), `compensate
 * <skill>` per compensation attempt, `plan` around planning with one `chat <model>` per model
 * call. Arguments and results are attributes only with content capture on. `traced` runs `fn`
 * under the span's context, so a skill's own instrumented calls become its children.
 */
import { SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span } from "@opentelemetry/api";
import { captureContent, contentAttr, context, failSpan, startSpan, tracingOn } from "./tracing.js";

export type ExecutionKind = "step" | "fallback" | "compensation";

export interface ToolCall {
  runId: string;
  stepId: string;
  skillName: string;
  sideEffects: string;
  attempt: number;
  idempotencyKey: string;
  kind: ExecutionKind;
  args: unknown;
}

/** `gen_ai.tool.type`: a skill that calls out to other systems is an extension; others run as functions. */
const toolType = (sideEffects: string) => (sideEffects === "external" ? "extension" : "function");

interface Outcome {
  ok: boolean;
  output?: unknown;
  error?: { code?: string; message?: string };
  inDoubt?: boolean;
}

/**
 * Run `fn` as one span (no-op when tracing is off: `fn(undefined)`, `spec` never called). `fn` gets the span's context;
 * `outcome` reads its result (an error-as-value fails the span like a throw does).
 */
export interface SpanSpec {
  name: string;
  /** @default the active context */
  parent?: Context;
  attributes: Attributes;
  kind?: SpanKind;
}

export function traced<T>(
  spec: () => SpanSpec,
  fn: (ctx: Context | undefined) => Promise<T>,
  outcome: (r: T, span: Span) => Outcome | void = () => undefined,
): Promise<T> {
  // tracing off: the body's own promise, not one more async frame around it (per attempt)
  if (!tracingOn()) {
    try {
      return fn(undefined);
    } catch (e) {
      return Promise.reject(e); // a body that throws at once still rejects, as it did in an async frame
    }
  }
  return tracedOn(spec(), fn, outcome);
}

async function tracedOn<T>(
  s: SpanSpec,
  fn: (ctx: Context | undefined) => Promise<T>,
  outcome: (r: T, span: Span) => Outcome | void,
): Promise<T> {
  const parent = s.parent ?? context.active();
  const span = startSpan(s.name, { parent, attributes: s.attributes, kind: s.kind ?? SpanKind.INTERNAL });
  const ctx = trace.setSpan(parent, span);
  try {
    const r = await context.with(ctx, () => fn(ctx));
    const o = outcome(r, span);
    if (o && !o.ok) failSpan(span, o.error);
    else span.setStatus({ code: SpanStatusCode.OK });
    return r;
  } catch (e) {
    failSpan(span, e as { code?: string; message?: string });
    span.recordException(e instanceof Error ? e : String(e));
    throw e;
  } finally {
    span.end();
  }
}

export function toolAttributes(c: ToolCall): Attributes {
  return {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": c.skillName,
    "gen_ai.tool.call.id": c.idempotencyKey,
    "gen_ai.tool.type": toolType(c.sideEffects),
    "toolchain.run.id": c.runId,
    "toolchain.step.id": c.stepId,
    "toolchain.attempt": c.attempt,
    "toolchain.execution.kind": c.kind,
    ...(captureContent() ? { "gen_ai.tool.call.arguments": contentAttr(c.args) } : {}),
  };
}

/** The outcome of a skill execution on its span (the result only with content capture on). */
export function toolOutcome(r: Outcome, span: Span): Outcome {
  if (r.inDoubt) span.setAttribute("toolchain.in_doubt", true);
  if (r.ok && captureContent()) span.setAttribute("gen_ai.tool.call.result", contentAttr(r.output));
  return r;
}

/** A chat model call's span attributes from its answer (token usage as the response reports it). */
export function recordUsage(
  span: Span | undefined,
  u: { inputTokens?: number; outputTokens?: number } | undefined,
  responseModel?: string,
): void {
  if (!span) return;
  if (typeof u?.inputTokens === "number") span.setAttribute("gen_ai.usage.input_tokens", u.inputTokens);
  if (typeof u?.outputTokens === "number") span.setAttribute("gen_ai.usage.output_tokens", u.outputTokens);
  if (responseModel) span.setAttribute("gen_ai.response.model", responseModel);
}

export { SpanKind };
