/**
 * A run's trace (OpenTelemetry GenAI conventions, SEMCONV_VERSION): `create_run <name>` when the
 * run is recorded (its context is stored with the run), one `invoke_workflow <name>` per drive (a
 * child of the stored context, linked to whatever resumed it: a confirm request), and for every
 * human wait an `await_confirmation <skill>` span recorded once it is decided, from the wait's
 * start to the decision, so no span stays open across the wait and a decision taken hours later in
 * another process lands in the same trace. Everything here is a no-op when tracing is off.
 */
import { ROOT_CONTEXT, SpanStatusCode, trace, type Context, type Link, type Span } from "@opentelemetry/api";
import type { RunEvent } from "../kernel/events.js";
import { carrierOf, context, contextOf, failSpan, randomTraceId, startSpan, tracingOn } from "./tracing.js";
import type { TraceCarrier } from "./trace-context.js";

/** The low-cardinality name of a run's spans: its plan's `planId`, else "toolchain". */
export function workflowName(plan: { planId?: unknown } | null | undefined): string {
  const id = plan?.planId;
  return typeof id === "string" && id.trim() ? id.trim().slice(0, 128) : "toolchain";
}

export interface RunTrace {
  traceId: string;
  /** The context the run's drives continue (stored with the run); absent while tracing is off. */
  traceContext?: TraceCarrier;
}

/**
 * The trace a new run belongs to: the caller's active context (a REST `traceparent`, MCP
 * `_meta.traceparent`, a library caller's span) or a new trace with the given id.
 */
export function openRunTrace(o: { name: string; runId: string; workspaceId: string; traceId?: string }): RunTrace {
  const active = trace.getSpanContext(context.active());
  const fallbackId = o.traceId ?? (active && trace.isSpanContextValid(active) ? active.traceId : randomTraceId());
  if (!tracingOn()) return { traceId: fallbackId };
  const span = startSpan(`create_run ${o.name}`, {
    rootTraceId: fallbackId,
    attributes: {
      "gen_ai.workflow.name": o.name,
      "toolchain.run.id": o.runId,
      "toolchain.workspace.id": o.workspaceId,
    },
  });
  span.end();
  const sc = span.spanContext();
  return { traceId: sc.traceId, traceContext: carrierOf(trace.setSpan(context.active(), span)) };
}

export interface DriveTraceInput {
  runId: string;
  workspaceId: string;
  traceId: string;
  traceContext?: TraceCarrier | null;
  name: string;
  owner: string;
  /** The context active where the drive was started (a confirm request's, a worker's). */
  trigger: Context;
  /** The wait a decision answered: when it began and for which skill (read from the event log). */
  waitOf(e: RunEvent): Promise<{ at: string; skillName?: string } | undefined>;
}

/** A drive's span and what it observes from the events the drive stores. */
export interface DriveTrace {
  /** The context nodes and skills run under (undefined when tracing is off). */
  ctx: Context | undefined;
  observe(events: readonly RunEvent[]): void;
  end(outcome: { status: string; error?: { code?: string; message?: string } | null; waiting?: number }): Promise<void>;
  fail(e: unknown): Promise<void>;
}

export const NO_DRIVE_TRACE: DriveTrace = {
  ctx: undefined,
  observe() {},
  end: async () => undefined,
  fail: async () => undefined,
};

const whoDecided = (by: unknown): string | undefined => {
  const b = by as { kind?: string; id?: string } | undefined;
  return b?.id ? `${b.kind ?? "user"}:${b.id}` : undefined;
};

export function startDriveTrace(i: DriveTraceInput): DriveTrace {
  if (!tracingOn()) return NO_DRIVE_TRACE;
  const runCtx = contextOf(i.traceContext ?? undefined) ?? context.active();
  const runSc = trace.getSpanContext(runCtx);
  const trig = trace.getSpanContext(i.trigger);
  const links: Link[] =
    trig && trace.isSpanContextValid(trig) && trig.spanId !== runSc?.spanId
      ? [{ context: trig, attributes: { "toolchain.link": "resumed_by" } }]
      : [];
  const attrs = {
    "gen_ai.operation.name": "invoke_workflow",
    "gen_ai.workflow.name": i.name,
    "toolchain.run.id": i.runId,
    "toolchain.workspace.id": i.workspaceId,
    "toolchain.drive.owner": i.owner,
  };
  const span = startSpan(`invoke_workflow ${i.name}`, {
    parent: runSc ? runCtx : ROOT_CONTEXT,
    rootTraceId: i.traceId,
    links,
    attributes: attrs,
  });
  const ctx = trace.setSpan(runCtx, span);
  const pending = new Set<Promise<void>>();
  const decided = (e: RunEvent) => {
    const p = i
      .waitOf(e)
      .then((w) => recordWait(runSc ? runCtx : ctx, span, i, e, w))
      .catch(() => undefined)
      .finally(() => pending.delete(p));
    pending.add(p);
  };
  const finish = async (f: (s: Span) => void) => {
    await Promise.all([...pending]);
    f(span);
    span.end();
  };
  return {
    ctx,
    observe(events) {
      for (const e of events) {
        if (e.type === "step_waiting_confirmation")
          span.addEvent("toolchain.confirmation.waiting", {
            "toolchain.confirmation.step": e.stepId ?? "",
            "toolchain.confirmation.round": Number(e.data.round ?? 0),
            "gen_ai.tool.name": String(e.data.skillName ?? ""),
          });
        else if (e.type === "step_confirmed") decided(e);
        else if (e.type === "step_retrying")
          span.addEvent("toolchain.step.retrying", {
            "toolchain.step.id": e.stepId ?? "",
            ...(typeof e.data.attempt === "number" ? { "toolchain.attempt": e.data.attempt } : {}),
            ...(typeof e.data.delayMs === "number" ? { "toolchain.retry.delay_ms": e.data.delayMs } : {}),
          });
      }
    },
    end: (o) =>
      finish((s) => {
        s.setAttribute("toolchain.run.status", o.status);
        if (o.waiting) s.setAttribute("toolchain.confirmation.waiting_steps", o.waiting);
        if (o.status === "failed" || o.status === "rollback_failed") failSpan(s, o.error ?? undefined);
        else s.setStatus({ code: SpanStatusCode.OK });
      }),
    fail: (e) =>
      finish((s) => {
        failSpan(s, e as { code?: string; message?: string });
        s.recordException(e instanceof Error ? e : String(e));
      }),
  };
}

/** The wait, recorded after the fact: from `step_waiting_confirmation` to the decision. */
function recordWait(
  parent: Context,
  drive: Span,
  i: DriveTraceInput,
  e: RunEvent,
  w: { at: string; skillName?: string } | undefined,
): void {
  const round = Number(e.key.split(":").at(-1) || 0);
  const decidedAt = Date.parse(e.at);
  const since = w ? Date.parse(w.at) : decidedAt;
  const a = {
    "toolchain.run.id": i.runId,
    "toolchain.confirmation.step": e.stepId ?? "",
    "toolchain.confirmation.round": Number.isFinite(round) ? round : 0,
    "toolchain.confirmation.waited_ms": Math.max(0, decidedAt - since),
    "toolchain.confirmation.decision": String(e.data.decision ?? ""),
    ...(whoDecided(e.data.by) ? { "toolchain.confirmation.decided_by": whoDecided(e.data.by)! } : {}),
    ...(typeof e.data.via === "string" ? { "toolchain.confirmation.via": e.data.via } : {}),
    ...(w?.skillName ? { "gen_ai.tool.name": w.skillName } : {}),
  };
  const span = startSpan(`await_confirmation ${w?.skillName ?? e.stepId ?? "step"}`, {
    parent,
    startTime: since,
    attributes: a,
    links: [{ context: drive.spanContext(), attributes: { "toolchain.link": "decided_in" } }],
  });
  span.addEvent(
    "toolchain.confirmation.waiting",
    { "toolchain.confirmation.step": a["toolchain.confirmation.step"] },
    since,
  );
  span.addEvent("toolchain.confirmation.decided", a, decidedAt);
  if (e.data.decision === "reject") span.setAttribute("toolchain.confirmation.rejected", true);
  span.end(decidedAt);
  drive.addEvent("toolchain.confirmation.decided", a, decidedAt);
}
