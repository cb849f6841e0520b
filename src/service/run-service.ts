/**
 * What the run routes do, over the Runtime, in one workspace's name. Returns tagged outcomes;
 * src/api/runs.ts translates them to HTTP (OUTCOME_STATUS) and coded errors via errors.ts, the
 * MCP tools (src/mcp/server.ts) and the CLI's stdio server use the same service.
 *
 * Execution: "inline" runs execute in this process (the default single-process server);
 * "queue" records them for worker processes (`toolchain worker`) and follows them through the
 * store, for API-only processes.
 */
import { randomBytes } from "node:crypto";
import type { PlanAuthor } from "../plan/admission.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { REDRIVABLE_RUN, TERMINAL_RUN } from "../kernel/status.js";
import type { RunEvent } from "../kernel/events.js";
import type { RunHandle, Runtime } from "../runtime/runtime.js";
import type { RunView } from "../kernel/run-view.js";
import { actorOf, rolesOf, skillMatcher, type Principal } from "../store/access-store.js";
import type { Via } from "../kernel/actor.js";
import { assertMay } from "../api/auth.js";
import type { RunRow } from "../store/run-store.js";
import { hasEnded, type RunFeeds } from "../live/feeds.js";
import type { ViewCache } from "../live/view-cache.js";
import type { ConfirmRequest, PlanRequest, PlanResponse, RedriveRequest, RunRequest } from "../api/schemas.js";
import { exportPlanGraph } from "../plan/graph-export.js";
import { FinishedViews, type FinishedViewsOptions } from "./finished-views.js";
import { currentView, present, type ApiRunView } from "./views.js";
import { withApprovals } from "../api/approval-view.js";

export type Execution = "inline" | "queue";

export interface RunHooks {
  /** Called with the run id as soon as the run is recorded (e.g. to follow its events). */
  onStart?: (runId: string) => void;
}

export type Outcome = { kind: "settled"; view: ApiRunView } | { kind: "accepted"; view: ApiRunView };
export const OUTCOME_STATUS: Record<Outcome["kind"], number> = { settled: 200, accepted: 202 };

export interface RunServiceOptions {
  runtime: Runtime;
  feeds: RunFeeds;
  execution: Execution;
  cache: ViewCache;
  /** A waiting request answers 202 with the current view after this long. */
  maxWaitMs: number;
  /** Finished runs' views kept in process (bounded by bytes, per workspace). */
  finishedViews?: FinishedViewsOptions;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** W3C traceparent's trace id when the caller sent one, else a fresh one. */
export function traceIdFrom(traceparent: string | undefined): string {
  const m = /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}$/.exec(traceparent?.trim() ?? "");
  return m && !/^0+$/.test(m[1]!) ? m[1]! : randomBytes(16).toString("hex");
}

/** Read the rest of a handle's events so nothing buffers for nobody. */
function drain(events: AsyncIterator<RunEvent>): void {
  void (async () => {
    for (;;) if ((await events.next()).done) return;
  })().catch(() => undefined);
}

/** A key over REST: a person (or a service acting as one); relaxing confirmations needs the key's permission. */
export function personOf(p: Principal): PlanAuthor {
  return { kind: "person", via: "rest", mayRelaxConfirmation: p.permissions?.includes("relax_confirmation") ?? false };
}

export class RunService {
  /** Views of finished runs (immutable). */
  readonly finished: FinishedViews;

  constructor(private readonly o: RunServiceOptions) {
    this.finished = new FinishedViews(o.finishedViews);
  }

  get runtime(): Runtime {
    return this.o.runtime;
  }

  /** The run, if it belongs to the caller's workspace; another workspace's run does not exist. */
  async own(p: Principal, runId: string): Promise<RunRow> {
    const row = runId.length <= 200 ? await this.runtime.store.getRow(runId) : undefined;
    if (!row || row.workspaceId !== p.workspaceId)
      throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
    return row;
  }

  /**
   * Validate (throws with the plan's code, creating nothing) and start or queue the run. With
   * `request` + `autoPlan` the run is created at once and the graph's planner node writes its plan.
   */
  async start(
    p: Principal,
    body: RunRequest,
    traceId: string,
    author: PlanAuthor = personOf(p),
    via: Via = "rest",
  ): Promise<{ runId: string; traceId: string; handle?: RunHandle }> {
    assertMay(p, "start");
    const base = {
      context: body.context,
      memory: body.memory,
      workspaceId: p.workspaceId,
      traceId,
      allowSkill: skillMatcher(p.allowedSkills),
      author,
      requestedBy: { by: actorOf(p), via },
    };
    if (body.plan === undefined) {
      if (!body.autoPlan || body.request === undefined) {
        throw new ToolchainError(
          ErrorCode.INVALID_BODY,
          body.autoPlan
            ? "body.request: autoPlan needs a request to plan from"
            : "body: send `plan`, or `request` with `autoPlan: true`",
        );
      }
      if (this.o.execution === "queue") return { ...(await this.runtime.submitRequest(body.request, base)), traceId };
      const handle = this.runtime.runRequest(body.request, base);
      return { runId: handle.runId, traceId, handle };
    }
    // validated in slices: a huge plan does not hold the event loop (other workspaces' requests)
    const opts = { ...base, compiled: await this.runtime.validateAsync(body.plan, base) };
    if (this.o.execution === "queue") return { ...(await this.runtime.submit(body.plan, opts)), traceId };
    const handle = this.runtime.run(body.plan, opts);
    return { runId: handle.runId, traceId, handle };
  }

  /** POST /plan: plan a request in the workspace's name; nothing runs. */
  async plan(p: Principal, body: PlanRequest): Promise<PlanResponse> {
    assertMay(p, "start");
    const out = await this.runtime.plan(body.request, {
      context: body.context ?? {},
      memory: body.memory ?? {},
      allowSkill: skillMatcher(p.allowedSkills),
      workspaceId: p.workspaceId,
    });
    return {
      plan: out.plan,
      planner: out.planner,
      warnings: out.warnings,
      graph: { ...exportPlanGraph(out.plan, () => "pending") },
      usage: out.usage ?? null,
      repairRounds: out.repairRounds,
      durationMs: out.durationMs,
      asks: out.asks ?? [],
    };
  }

  async run(
    p: Principal,
    body: RunRequest,
    traceId: string,
    hooks?: RunHooks,
    author?: PlanAuthor,
    via?: Via,
  ): Promise<Outcome> {
    const o = await this.forCaller(p, await this.runOutcome(p, body, traceId, hooks, author, via));
    const err = o.view.error;
    if (o.kind === "settled" && o.view.status === "failed" && err?.code === ErrorCode.PLANNING_FAILED) {
      // nothing ran: the request could not be planned (422, like POST /plan); the failed run stays for its events
      throw new ToolchainError(ErrorCode.PLANNING_FAILED, err.message, {
        details: { ...(err.details as object | undefined), runId: o.view.runId },
      });
    }
    return o;
  }

  private async runOutcome(
    p: Principal,
    body: RunRequest,
    traceId: string,
    hooks?: RunHooks,
    author?: PlanAuthor,
    via?: Via,
  ): Promise<Outcome> {
    const { runId, handle } = await this.start(p, body, traceId, author, via);
    hooks?.onStart?.(runId);
    const wait = body.wait ?? true;
    if (handle) {
      const events = handle.events[Symbol.asyncIterator]();
      if (!wait) {
        // answer once the run is recorded and started (its first event is stored)
        const first = await Promise.race([events.next(), handle.result.then(() => undefined)]);
        if (first && !first.done) drain(events);
        return { kind: "accepted", view: await this.view(p, runId, traceId) };
      }
      drain(events);
      return this.settle(p, runId, () => handle.result, traceId);
    }
    if (!wait) return { kind: "accepted", view: await this.view(p, runId, traceId) };
    return this.settle(p, runId, (signal) => this.followed(runId, signal), traceId);
  }

  /** The events of a new run until it is terminal or waits (POST /stream). */
  async stream(
    p: Principal,
    body: RunRequest,
    traceId: string,
    signal: AbortSignal,
    via?: Via,
  ): Promise<AsyncIterable<RunEvent>> {
    const { runId, handle } = await this.start(p, body, traceId, undefined, via);
    if (handle) {
      handle.result.catch(() => undefined);
      return handle.events;
    }
    return this.o.feeds.follow(runId, { after: 0, until: "settled", signal });
  }

  /** `via`: the surface the principal decided through (the principal is always the one recorded). */
  async confirm(p: Principal, runId: string, body: ConfirmRequest, via: Via = "rest"): Promise<Outcome> {
    assertMay(p, "decide");
    const row = await this.own(p, runId);
    const { wait, ...input } = body;
    const handle = await this.runtime.confirm(runId, input, { by: actorOf(p), via, roles: rolesOf(p) });
    return this.forCaller(p, await this.afterHandle(p, row, handle, wait ?? true));
  }

  async cancel(
    p: Principal,
    runId: string,
    body: { reason?: string; wait?: boolean },
    via: Via = "rest",
  ): Promise<Outcome> {
    assertMay(p, "cancel");
    const row = await this.own(p, runId);
    const handle = await this.runtime.cancel(runId, body.reason, { by: actorOf(p), via });
    return this.forCaller(p, await this.afterHandle(p, row, handle, body.wait ?? true));
  }

  /**
   * Redrive a failed run (Runtime.redrive): the one path REST, MCP, the CLI and the console take.
   * Answers at once (202, the run executing again) unless `wait`.
   */
  async redrive(p: Principal, runId: string, body: RedriveRequest, via: Via = "rest"): Promise<Outcome> {
    assertMay(p, "redrive");
    const row = await this.own(p, runId);
    const handle = await this.runtime.redrive(
      runId,
      { overrides: body.overrides, queue: this.o.execution === "queue" },
      { by: actorOf(p), via },
    );
    return this.forCaller(p, await this.afterHandle(p, row, handle, body.wait ?? false));
  }

  private async afterHandle(p: Principal, row: RunRow, handle: RunHandle, wait: boolean): Promise<Outcome> {
    drain(handle.events[Symbol.asyncIterator]());
    handle.result.catch(() => undefined);
    if (!wait) {
      handle.release?.();
      return { kind: "accepted", view: await currentView(this.runtime, row) };
    }
    return this.settle(
      p,
      row.runId,
      (signal) => {
        // a handle following a run executed elsewhere polls until released
        signal.addEventListener("abort", () => handle.release?.(), { once: true });
        return handle.result;
      },
      row.traceId,
    );
  }

  async view(p: Principal, runId: string, traceId?: string): Promise<ApiRunView> {
    const row = await this.own(p, runId);
    return this.viewFor(p, await currentView(this.runtime, traceId ? { ...row, traceId } : row));
  }

  /** The view as the caller sees it: each waiting step under a policy with its approval state (src/api/approval-view.ts). */
  async viewFor(p: Principal, view: ApiRunView): Promise<ApiRunView> {
    if (!view.pendingConfirmations.length) return view;
    const pending = await withApprovals(
      this.runtime,
      p,
      view.runId,
      view.plan,
      view.pendingConfirmations,
      view.requestedBy,
    );
    return pending.some((c) => "approval" in c) ? { ...view, pendingConfirmations: pending } : view;
  }

  private async forCaller(p: Principal, o: Outcome): Promise<Outcome> {
    return { ...o, view: await this.viewFor(p, o.view) };
  }

  /** A body from the shared cache, with the caller's approval state when a step waits. */
  private async bodyFor(p: Principal, body: string): Promise<string> {
    if (!body.includes('"pendingConfirmations":[{')) return body;
    const view = JSON.parse(body) as ApiRunView;
    const mine = await this.viewFor(p, view);
    return mine === view ? body : JSON.stringify(mine);
  }

  /** GET /runs/:id as a JSON body, from the cache when it is still current. */
  async viewBody(p: Principal, runId: string): Promise<{ body: string; cache: "hit" | "miss" }> {
    const done = this.finished.get(runId);
    if (done) {
      if (done.workspaceId !== p.workspaceId)
        throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
      return { body: await this.bodyFor(p, done.body), cache: "hit" };
    }
    const cached = await this.o.cache.lookup(runId);
    if ("hit" in cached) {
      if (cached.hit.workspaceId !== p.workspaceId)
        throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
      return { body: await this.bodyFor(p, cached.hit.body), cache: "hit" };
    }
    const row = await this.own(p, runId);
    const view = await currentView(this.runtime, row);
    const body = JSON.stringify(view);
    // rollback_failed is not final: a decision on its failed compensation revives the run, and while
    // that retry runs the view reads rollback_failed with nothing pending; nor are failed and
    // rolled_back: a redrive (by any process) runs them again
    if (
      TERMINAL_RUN.has(view.status) &&
      view.status !== "rollback_failed" &&
      !REDRIVABLE_RUN.has(view.status) &&
      !view.pendingConfirmations.length
    ) {
      // a finished run's view never changes again: keep the most recent ones in this process
      this.finished.set(runId, row.workspaceId, body);
    }
    await this.o.cache.store(runId, cached.miss.version, row.workspaceId, body);
    return { body: await this.bodyFor(p, body), cache: "miss" };
  }

  private async settle(
    p: Principal,
    runId: string,
    result: (signal: AbortSignal) => Promise<RunView>,
    traceId: string,
  ): Promise<Outcome> {
    let timer: NodeJS.Timeout | undefined;
    const stop = new AbortController();
    const timeout = new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), this.o.maxWaitMs)));
    try {
      const pending = result(stop.signal);
      pending.catch(() => undefined); // after a timeout nobody awaits it
      const view = await Promise.race([pending, timeout]);
      if (view) return { kind: "settled", view: present(view, traceId) };
    } finally {
      clearTimeout(timer);
      stop.abort();
    }
    return { kind: "accepted", view: await this.view(p, runId, traceId) };
  }

  /** A run executed by a worker: its view once it is terminal or waits and the worker let go of it. */
  private async followed(runId: string, signal: AbortSignal): Promise<RunView> {
    while (!signal.aborted) {
      const row = await this.runtime.store.getRow(runId);
      if (!row) throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
      if (hasEnded("settled", row.status, 0)) {
        // the executor writes the final projection, then releases its lease
        if (!row.leaseOwner) return this.runtime.getRun(runId);
        await sleep(20);
        continue;
      }
      for await (const _ of this.o.feeds.follow(runId, { after: row.lastSeq, until: "settled", signal })) {
        // only the end matters here
      }
    }
    throw new ToolchainError(ErrorCode.INTERNAL, "stopped waiting");
  }
}
