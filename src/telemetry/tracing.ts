/**
 * The tracing primitives every instrumented place uses. Off (no SDK set up and no tracer provider
 * registered by the embedding application), `tracingOn()` is false and callers skip all span work:
 * the hot path pays one boolean check. On, spans go to the global tracer provider: ours
 * (src/telemetry/setup.ts, from OTEL_* variables) or the embedding application's own SDK.
 */
import {
  context,
  createTraceState,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type TimeInput,
} from "@opentelemetry/api";
import { randomBytes } from "node:crypto";
import { formatTraceparent, parseTraceparent, type TraceCarrier } from "./trace-context.js";

export const TRACER_NAME = "toolchain-runtime";
/** The GenAI semantic conventions version the span names and attributes follow (README, Observability). */
export const SEMCONV_VERSION = "1.45.0";

const state = { ours: false, content: false, foreign: false };

/** Our SDK was set up (setup.ts), with or without content capture. */
export function markTracing(on: boolean, captureContent: boolean): void {
  state.ours = on;
  state.content = on && captureContent;
}

/**
 * The API's own no-op provider: what an unregistered proxy delegates to, one instance per copy of
 * the API. Compared by identity, not by class name: a bundle renames the class
 * (`NoopTracerProvider2`), which once made every bundled process (`npm start`, the worker) take
 * tracing as on and pay for span work on every attempt.
 */
const NOOP_PROVIDER = new ProxyTracerProvider().getDelegate();

/** Whether spans are recorded: our SDK, or a tracer provider the embedding application registered. */
export function tracingOn(): boolean {
  if (state.ours || state.foreign) return true;
  const p = trace.getTracerProvider();
  const d = p instanceof ProxyTracerProvider ? p.getDelegate() : p;
  // the API's default delegate is its no-op provider; anything else records (an application's SDK)
  state.foreign = d !== NOOP_PROVIDER;
  return state.foreign;
}

/** Tool arguments and results as span attributes: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true. */
export function captureContent(): boolean {
  return state.content || (state.foreign && process.env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT === "true");
}

const tracer = () => trace.getTracer(TRACER_NAME, SEMCONV_VERSION);

/**
 * A root span whose trace id is the run's (its id is known, and shown, before any span exists).
 * Our id generator (setup.ts) reads this while `startSpan` runs, synchronously.
 */
let forcedTraceId: string | undefined;
export const takeForcedTraceId = (): string | undefined => forcedTraceId;

export interface SpanOptions {
  parent?: Context;
  attributes?: Attributes;
  links?: Link[];
  kind?: SpanKind;
  startTime?: TimeInput;
  /** When `parent` holds no span: the new root span's trace id (honoured by our SDK). */
  rootTraceId?: string;
}

export function startSpan(name: string, o: SpanOptions = {}): Span {
  const parent = o.parent ?? context.active();
  const opts = { attributes: o.attributes, links: o.links, kind: o.kind ?? SpanKind.INTERNAL, startTime: o.startTime };
  if (!o.rootTraceId || trace.getSpanContext(parent)) return tracer().startSpan(name, opts, parent);
  forcedTraceId = o.rootTraceId;
  try {
    return tracer().startSpan(name, opts, parent);
  } finally {
    forcedTraceId = undefined;
  }
}

/** The context a stored or received carrier names (a remote parent), or undefined. */
export function contextOf(c: TraceCarrier | undefined, base: Context = ROOT_CONTEXT): Context | undefined {
  const p = parseTraceparent(c?.traceparent);
  if (!p) return undefined;
  return trace.setSpanContext(base, {
    traceId: p.traceId,
    spanId: p.spanId,
    traceFlags: p.flags & 1,
    isRemote: true,
    ...(c?.tracestate ? { traceState: createTraceState(c.tracestate) } : {}),
  });
}

/** The carrier of the span in `ctx` (to store with a run or send on a request), or undefined. */
export function carrierOf(ctx: Context | undefined): TraceCarrier | undefined {
  const sc = ctx && trace.getSpanContext(ctx);
  if (!sc || !trace.isSpanContextValid(sc)) return undefined;
  const traceparent = formatTraceparent(sc.traceId, sc.spanId, sc.traceFlags);
  const ts = sc.traceState?.serialize();
  return ts ? { traceparent, tracestate: ts } : { traceparent };
}

/** `traceparent` / `tracestate` headers for an outgoing request made under `ctx` ({} when there is no span). */
export function traceHeaders(ctx: Context | undefined = context.active()): Record<string, string> {
  const c = carrierOf(ctx);
  return c ? { ...c } : {};
}

/** A failed operation: `error.type` (our stable error code) and the span's status. */
export function failSpan(span: Span, error: { code?: unknown; message?: unknown } | undefined): void {
  const e = error as { code?: unknown; status?: unknown; name?: unknown } | undefined;
  const code =
    typeof e?.code === "string"
      ? e.code
      : typeof e?.status === "number"
        ? String(e.status)
        : typeof e?.name === "string" && e.name !== "Error"
          ? e.name
          : "_OTHER";
  span.setAttribute("error.type", code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: typeof error?.message === "string" ? error.message : code });
}

/** JSON for a content attribute (opt-in), bounded so one large value cannot bloat an export. */
export function contentAttr(v: unknown, max = 8_192): string {
  let s: string;
  try {
    s = JSON.stringify(v) ?? "null";
  } catch {
    s = String(v);
  }
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

/** `fn` under `ctx` when there is one (a drive's span context), else under the active context. */
export function inContext<T>(ctx: Context | undefined, fn: () => T): T {
  return ctx ? context.with(ctx, fn) : fn();
}

export const randomTraceId = (): string => randomBytes(16).toString("hex");

export { context, SpanKind, SpanStatusCode, trace, type Context, type Span };
