/** The /api/tool-chains routes: parse, call the RunService, translate its outcome. */
import { Router, type Response } from "express";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { TERMINAL_RUN } from "../kernel/status.js";
import { assertStorable } from "../kernel/storable.js";
import { actingOf, assertMay, principalOf } from "./auth.js";
import { parseWith } from "./errors.js";
import { inbox } from "./approval-view.js";
import { previewEdited } from "../service/preview-edit.js";
import { rolesAllow } from "../kernel/actor.js";
import { rolesOf } from "../store/access-store.js";
import { OUTCOME_STATUS, traceIdFrom, type Outcome, type RunService } from "../service/run-service.js";
import {
  CancelRequestSchema,
  RedriveRequestSchema,
  ConfirmRequestSchema,
  DecisionsQuerySchema,
  EventsQuerySchema,
  ListRunsQuerySchema,
  PlanRequestSchema,
  PreviewRequestSchema,
  RunRequestSchema,
} from "./schemas.js";
import { pipeEvents, SseStream, streamFeed, type SseOptions } from "./sse.js";
import type { RunFeeds } from "../live/feeds.js";
import type { DecisionFeeds } from "../live/decision-feed.js";
import type { StreamSlots } from "./stream-slots.js";

export interface RunsRouterOptions {
  service: RunService;
  feeds: RunFeeds;
  decisions: DecisionFeeds;
  sse: SseOptions;
  /** Open streams (ended on shutdown). */
  streams: Set<SseStream>;
  /** Open streams per key. */
  slots: StreamSlots;
}

function respond(res: Response, o: Outcome): void {
  if (o.kind === "accepted") res.setHeader("Location", `/api/tool-chains/runs/${encodeURIComponent(o.view.runId)}`);
  res.status(OUTCOME_STATUS[o.kind]).json(o.view);
}

/** Printable ASCII without spaces, at most 200 characters (run ids are UUIDs, or chosen by library callers). */
const RUN_ID = /^[\x21-\x7e]{1,200}$/;

/**
 * What a request hands the planner and the run (its words, context, memory) is stored with the
 * run: refused here, naming the field, before planning starts (a plan is checked by the runtime).
 */
function assertStorableRequest(body: { request?: string; context?: unknown; memory?: unknown }): void {
  if (body.request !== undefined) assertStorable(body.request, "request");
  if (body.context !== undefined) assertStorable(body.context, "context");
  if (body.memory !== undefined) assertStorable(body.memory, "memory");
}

/** The surface a REST caller says it is (`X-Toolchain-Client: console | cli`), else rest. */
const viaOf = (req: { get(h: string): string | undefined }, res: Response) =>
  actingOf(principalOf(res), req.get("x-toolchain-client")).via;

const wantsSse = (accept: string | undefined) => (accept ?? "").toLowerCase().includes("text/event-stream");

export function runsRouter(o: RunsRouterOptions): Router {
  const r = Router();
  const { service } = o;
  const open = (res: Response, release: () => void) => {
    const sse = new SseStream(res, o.sse);
    o.streams.add(sse);
    sse.signal.addEventListener("abort", () => (o.streams.delete(sse), release()), { once: true });
    return sse;
  };

  // an id no run can have (NUL, control characters, too long) is a missing run, not a database error
  r.param("runId", (_req, _res, next, id: string) => {
    next(RUN_ID.test(id) ? undefined : new ToolchainError(ErrorCode.RUN_NOT_FOUND, "run not found: not a run id"));
  });
  r.post("/api/tool-chains/plan", async (req, res) => {
    assertMay(principalOf(res), "start");
    const body = parseWith(PlanRequestSchema, req.body, ErrorCode.INVALID_BODY, "body");
    assertStorableRequest(body);
    res.json(await service.plan(principalOf(res), body));
  });

  r.post("/api/tool-chains/run", async (req, res) => {
    assertMay(principalOf(res), "start");
    const body = parseWith(RunRequestSchema, req.body, ErrorCode.INVALID_BODY, "body");
    assertStorableRequest(body);
    respond(
      res,
      await service.run(
        principalOf(res),
        body,
        traceIdFrom(req.get("traceparent")),
        undefined,
        undefined,
        viaOf(req, res),
      ),
    );
  });

  r.post("/api/tool-chains/stream", async (req, res) => {
    assertMay(principalOf(res), "start");
    const body = parseWith(RunRequestSchema, req.body, ErrorCode.INVALID_BODY, "body");
    assertStorableRequest(body);
    const stop = new AbortController();
    // over the key's stream limit: refused before the run is created
    const release = o.slots.acquire(principalOf(res).keyId);
    let events;
    try {
      // validation errors answer as JSON before the stream opens
      events = await service.stream(
        principalOf(res),
        body,
        traceIdFrom(req.get("traceparent")),
        stop.signal,
        viaOf(req, res),
      );
    } catch (e) {
      release();
      throw e;
    }
    const sse = open(res, release);
    sse.signal.addEventListener("abort", () => stop.abort(), { once: true });
    await pipeEvents(sse, events);
  });

  // the inbox: confirmations waiting in the workspace, oldest first; mine=true: those the caller may decide now
  r.get("/api/tool-chains/decisions", async (req, res) => {
    const q = parseWith(DecisionsQuerySchema, req.query, ErrorCode.INVALID_QUERY, "query");
    const p = principalOf(res);
    res.json({ decisions: await inbox(service.runtime, p, q.mine === "true", rolesAllow(rolesOf(p), "decide")) });
  });

  // the inbox live: every decision and wait event of the workspace's runs, on one stream (no resume:
  // a client that reconnects reloads the inbox)
  r.get("/api/tool-chains/decisions/events", (req, res) => {
    const p = principalOf(res);
    if (!wantsSse(req.get("accept")))
      throw new ToolchainError(ErrorCode.INVALID_QUERY, "Accept: send text/event-stream for this stream");
    const sse = open(res, o.slots.acquire(p.keyId));
    const stop = o.decisions.listen(p.workspaceId, (e) => sse.event(e));
    sse.signal.addEventListener("abort", stop, { once: true });
  });

  r.get("/api/tool-chains/runs", async (req, res) => {
    const q = parseWith(ListRunsQuerySchema, req.query, ErrorCode.INVALID_QUERY, "query");
    res.json(
      await service.runtime.store.listRuns({
        workspaceId: principalOf(res).workspaceId,
        statuses: q.status,
        limit: q.limit,
        cursor: q.cursor,
      }),
    );
  });

  r.get("/api/tool-chains/runs/:runId", async (req, res) => {
    const { body, cache } = await service.viewBody(principalOf(res), req.params.runId);
    res.setHeader("X-Cache", cache);
    res.type("application/json").send(body);
  });

  r.get("/api/tool-chains/runs/:runId/events", async (req, res) => {
    const q = parseWith(EventsQuerySchema, req.query, ErrorCode.INVALID_QUERY, "query");
    const row = await service.own(principalOf(res), req.params.runId);
    if (!wantsSse(req.get("accept"))) {
      const events = await service.runtime.events(row.runId, q.after);
      res.json({ events: events.map(({ key: _key, ...e }) => e) });
      return;
    }
    // a reconnecting EventSource sends the last id it saw
    const lastId = req.get("last-event-id");
    const claimed =
      lastId !== undefined && lastId.trim() !== ""
        ? parseWith(EventsQuerySchema.shape.after, lastId.trim(), ErrorCode.INVALID_QUERY, "Last-Event-ID")
        : q.after;
    // an id beyond the log (another server, a stale database) means "from the end of the log"
    const after = Math.min(claimed, row.lastSeq);
    if (TERMINAL_RUN.has(row.status) && !row.pendingConfirmations.length && after >= row.lastSeq) {
      // nothing more will come: 204 tells EventSource not to reconnect
      res.status(204).end();
      return;
    }
    const sse = open(res, o.slots.acquire(principalOf(res).keyId));
    await streamFeed(sse, o.feeds, row.runId, { after, until: "terminal" });
  });

  r.post("/api/tool-chains/runs/:runId/confirm", async (req, res) => {
    assertMay(principalOf(res), "decide");
    const body = parseWith(ConfirmRequestSchema, req.body, ErrorCode.INVALID_BODY, "body");
    respond(res, await service.confirm(principalOf(res), req.params.runId, body, viaOf(req, res)));
  });

  // what approving with edited arguments would do: the skill's own preview, nothing recorded
  r.post("/api/tool-chains/runs/:runId/steps/:stepId/preview", async (req, res) => {
    assertMay(principalOf(res), "decide");
    const body = parseWith(PreviewRequestSchema, req.body, ErrorCode.INVALID_BODY, "body");
    assertStorable(body.arguments, "arguments");
    const row = await service.own(principalOf(res), req.params.runId);
    res.json(await previewEdited(service.runtime, row, req.params.stepId, body));
  });

  r.post("/api/tool-chains/runs/:runId/cancel", async (req, res) => {
    assertMay(principalOf(res), "cancel");
    const body = parseWith(CancelRequestSchema, req.body ?? {}, ErrorCode.INVALID_BODY, "body");
    respond(res, await service.cancel(principalOf(res), req.params.runId, body, viaOf(req, res)));
  });

  r.post("/api/tool-chains/runs/:runId/redrive", async (req, res) => {
    assertMay(principalOf(res), "redrive");
    const body = parseWith(RedriveRequestSchema, req.body ?? {}, ErrorCode.INVALID_BODY, "body");
    respond(res, await service.redrive(principalOf(res), req.params.runId, body, viaOf(req, res)));
  });

  return r;
}
