/**
 * W3C Trace Context as plain data (pure): what a run stores to continue its trace in another
 * process hours later, and what the REST, MCP and library surfaces hand in.
 * https://www.w3.org/TR/trace-context/ (version 00).
 */

/** A W3C `traceparent` (and `tracestate`), as stored with a run and sent on HTTP requests. */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
}

export interface ParsedTraceparent {
  traceId: string;
  spanId: string;
  /** The sampled flag (bit 0 of trace-flags). */
  sampled: boolean;
  flags: number;
}

const TRACEPARENT = /^([\da-f]{2})-([\da-f]{32})-([\da-f]{16})-([\da-f]{2})(-.*)?$/;

/** A valid `traceparent` parsed, else undefined (all-zero ids and version ff are invalid). */
export function parseTraceparent(value: string | undefined | null): ParsedTraceparent | undefined {
  const m = TRACEPARENT.exec(value?.trim().toLowerCase() ?? "");
  if (!m) return undefined;
  const [, version, traceId, spanId, flags, rest] = m;
  if (version === "ff" || (version === "00" && rest)) return undefined;
  if (/^0+$/.test(traceId!) || /^0+$/.test(spanId!)) return undefined;
  const f = parseInt(flags!, 16);
  return { traceId: traceId!, spanId: spanId!, flags: f, sampled: (f & 1) === 1 };
}

export function formatTraceparent(traceId: string, spanId: string, flags: number): string {
  return `00-${traceId}-${spanId}-${flags.toString(16).padStart(2, "0")}`;
}

/** `tracestate` kept only when it is plausible (list-members, at most 512 characters, no control characters). */
export function cleanTracestate(value: string | undefined | null): string | undefined {
  const v = value?.trim();
  if (!v || v.length > 512 || /[^\x20-\x7e]/.test(v)) return undefined;
  return v;
}

/** The carrier a caller sent (headers, MCP `params._meta`), when its `traceparent` is valid. */
export function carrierFrom(src: Record<string, unknown>): TraceCarrier | undefined {
  const tp = typeof src.traceparent === "string" ? src.traceparent.trim().toLowerCase() : undefined;
  if (!parseTraceparent(tp)) return undefined;
  const ts = typeof src.tracestate === "string" ? cleanTracestate(src.tracestate) : undefined;
  return ts ? { traceparent: tp!, tracestate: ts } : { traceparent: tp! };
}

/** A stored carrier read back (a row's jsonb): undefined unless it is one. */
export function asCarrier(x: unknown): TraceCarrier | undefined {
  return x && typeof x === "object" ? carrierFrom(x as Record<string, unknown>) : undefined;
}
