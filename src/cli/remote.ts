/**
 * The run commands against a running server (`--url`, `--key`): the REST API for actions and
 * views, its server-sent events for live progress. The CLI then needs no database of its own, so
 * it works while `npm start` holds the embedded one.
 *
 * When a run has settled is the server's call: POST /confirm and /cancel with `wait: true`
 * answer with the settled view while the event stream shows progress. A new run is started with
 * `wait: false` (its id is needed to follow it) and is settled when, after one of its "may end"
 * events, its view is terminal or waiting.
 */
import { EventSourceParserStream } from "eventsource-parser/stream";
import type { RunEvent } from "../kernel/events.js";
import { Channel } from "../kernel/channel.js";
import { TERMINAL_RUN, type RunStatus } from "../kernel/status.js";
import type { PlanningOutcome } from "../planner/index.js";
import type { ConfirmInput } from "../kernel/decision.js";
import type { RunView } from "../kernel/run-view.js";
import type { SkillManifestEntry } from "../skills/registry.js";
import type { RunPage } from "../store/run-store.js";
import type { Backend, Execution, StartInput } from "./backend.js";
import { CliError } from "./exit.js";

/** Events after which a run may have stopped (then its view says whether it did). */
const MAY_END = new Set<string>([
  "run_completed",
  "run_failed",
  "run_waiting_confirmation",
  "rollback_waiting_decision",
]);
const settledStatus = (s: RunStatus) => TERMINAL_RUN.has(s) || s === "waiting_confirmation";
const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((r) => {
    const t = setTimeout(r, ms);
    signal?.addEventListener("abort", () => (clearTimeout(t), r()), { once: true });
  });

interface SseMessage {
  event: string;
  data: string;
}

export class RemoteBackend implements Backend {
  readonly kind = "remote" as const;
  readonly workspace = undefined;
  readonly where: string;
  private readonly base: string;
  /** Every open request and stream, aborted by close() (a process that exits leaves nothing behind). */
  private readonly closing = new AbortController();

  constructor(
    url: string,
    private readonly key: string,
  ) {
    this.base = url.replace(/\/+$/, "");
    this.where = this.base;
  }

  private async fetch(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
    signal?: AbortSignal,
  ): Promise<Response> {
    try {
      return await fetch(this.base + path, {
        method,
        headers: {
          authorization: `Bearer ${this.key}`,
          "x-toolchain-client": "cli",
          ...(body !== undefined ? { "content-type": "application/json" } : {}),
          ...headers,
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, this.closing.signal]) : this.closing.signal,
      });
    } catch (e) {
      if ((e as Error).name === "AbortError") throw e;
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      throw new CliError(
        "UNREACHABLE",
        `cannot reach ${this.base}: ${cause?.code ?? cause?.message ?? (e as Error).message}`,
      );
    }
  }

  /** A JSON call; an error answer becomes a CliError with the API's code (RUN_NOT_FOUND, UNAUTHORIZED, …). */
  private async call<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
    const res = await this.fetch(method, path, body);
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    if (!res.ok) {
      const err = (parsed as { error?: { code?: string; message?: string; details?: unknown } } | undefined)?.error;
      throw new CliError(
        err?.code ?? `HTTP_${res.status}`,
        err?.message ?? `${method} ${path} answered ${res.status} ${text.slice(0, 200)}`,
        err?.details,
      );
    }
    return { status: res.status, body: parsed as T };
  }

  /** Server-sent events of `path` until the server ends the stream or `signal` aborts; undefined for a 204. */
  private async *sse(path: string, signal: AbortSignal): AsyncGenerator<SseMessage> {
    let res: Response;
    try {
      res = await this.fetch("GET", path, undefined, { accept: "text/event-stream" }, signal);
    } catch (e) {
      if ((e as Error).name === "AbortError") return;
      throw e;
    }
    if (res.status === 204 || !res.body) return;
    if (!res.ok) {
      const body = (await res.json().catch(() => undefined)) as
        { error?: { code: string; message: string } } | undefined;
      throw new CliError(
        body?.error?.code ?? `HTTP_${res.status}`,
        body?.error?.message ?? `event stream answered ${res.status}`,
      );
    }
    // the SSE wire format is parsed by eventsource-parser (comments, multi-line data, CRLF)
    const reader = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream()).getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        if (value.data) yield { event: value.event ?? "message", data: value.data };
      }
    } catch (e) {
      if ((e as Error).name !== "AbortError") throw e;
    } finally {
      await reader.cancel().catch(() => undefined);
    }
  }

  /**
   * Follow `runId`'s events after `after` until it settles: `answer` is the server's settled
   * view when the action waited for it (confirm, cancel); otherwise the view is checked after each
   * event that may end the run, and polled briefly after it (the executor writes the view last).
   */
  private follow(runId: string, after: number, answer?: Promise<RunView | undefined>): Execution {
    const ch = new Channel<RunEvent>();
    const stop = new AbortController();
    let last = after;
    let sawEnd = false;
    let finished = false;
    let resolveView!: (v: RunView) => void;
    let rejectView!: (e: unknown) => void;
    const result = new Promise<RunView>((res, rej) => ((resolveView = res), (rejectView = rej)));
    result.catch(() => undefined);
    const push = (e: RunEvent) => {
      if (e.seq <= last) return;
      last = e.seq;
      if (MAY_END.has(e.type)) sawEnd = true;
      ch.push(e);
    };
    const finish = async (view: RunView) => {
      if (finished) return;
      finished = true;
      // the stream may lag the view: every stored event is shown before the end
      for (const e of await this.events(runId, last)) push(e);
      stop.abort();
      ch.close();
      resolveView(view);
    };
    const fail = (e: unknown) => {
      if (finished) return;
      finished = true;
      stop.abort();
      ch.fail(e);
      rejectView(e);
    };
    answer?.then((v) => (v && settledStatus(v.status) ? finish(v) : undefined)).catch(fail);
    // the view check: after a "may end" event, often; otherwise rarely (a lost stream)
    void (async () => {
      while (!finished) {
        await sleep(sawEnd ? 150 : 1_000, stop.signal);
        if (finished || !sawEnd) continue;
        const v = await this.getRun(runId).catch(() => undefined);
        if (v && settledStatus(v.status)) await finish(v).catch(fail);
      }
    })().catch(fail);
    void (async () => {
      while (!finished) {
        for await (const m of this.sse(
          `/api/tool-chains/runs/${encodeURIComponent(runId)}/events?after=${last}`,
          stop.signal,
        )) {
          push(JSON.parse(m.data) as RunEvent);
        }
        // the stream ended (204 after the end, idle timeout, server restart): look, then resume after `last`
        if (finished) return;
        const v = await this.getRun(runId);
        if (settledStatus(v.status) && (sawEnd || TERMINAL_RUN.has(v.status))) await finish(v);
        else await sleep(500, stop.signal);
      }
    })().catch(fail);
    return { runId, events: ch, result };
  }

  private async lastSeq(runId: string): Promise<number> {
    const events = await this.events(runId, 0);
    return events.length ? events[events.length - 1]!.seq : 0;
  }

  async start(input: StartInput): Promise<Execution> {
    const body = input.request !== undefined ? { request: input.request, autoPlan: true } : { plan: input.plan };
    const { body: view } = await this.call<RunView>("POST", "/api/tool-chains/run", {
      ...body,
      context: input.context ?? {},
      memory: input.memory ?? {},
      wait: false,
    });
    return this.follow(view.runId, 0);
  }

  async confirm(runId: string, input: ConfirmInput): Promise<Execution> {
    const after = await this.lastSeq(runId);
    const answer = this.call<RunView>("POST", `/api/tool-chains/runs/${encodeURIComponent(runId)}/confirm`, {
      ...input,
      wait: true,
    });
    // a refused decision (CONFIRMATION_NOT_PENDING, …) fails here, before any progress is drawn
    const early = await Promise.race([
      answer.then(
        (a) => a,
        (e: unknown) => ({ error: e }),
      ),
      sleep(300).then(() => undefined),
    ]);
    if (early && "error" in early) throw early.error;
    return this.follow(
      runId,
      after,
      answer.then((a) => (a.status === 200 ? a.body : undefined)),
    );
  }

  async cancel(runId: string, reason?: string): Promise<Execution> {
    const after = await this.lastSeq(runId);
    const answer = this.call<RunView>("POST", `/api/tool-chains/runs/${encodeURIComponent(runId)}/cancel`, {
      ...(reason ? { reason } : {}),
      wait: true,
    });
    const early = await Promise.race([
      answer.then(
        (a) => a,
        (e: unknown) => ({ error: e }),
      ),
      sleep(300).then(() => undefined),
    ]);
    if (early && "error" in early) throw early.error;
    return this.follow(
      runId,
      after,
      answer.then((a) => (a.status === 200 ? a.body : undefined)),
    );
  }

  async redrive(runId: string, overrides?: Record<string, Record<string, unknown>>): Promise<Execution> {
    const after = await this.lastSeq(runId);
    // answered at once (202): the events after the redrive are followed until the run settles
    await this.call<RunView>("POST", `/api/tool-chains/runs/${encodeURIComponent(runId)}/redrive`, {
      ...(overrides ? { overrides } : {}),
    });
    return this.follow(runId, after);
  }

  async getRun(runId: string): Promise<RunView> {
    return (await this.call<RunView>("GET", `/api/tool-chains/runs/${encodeURIComponent(runId)}`)).body;
  }

  async events(runId: string, after = 0): Promise<RunEvent[]> {
    return (
      await this.call<{ events: RunEvent[] }>(
        "GET",
        `/api/tool-chains/runs/${encodeURIComponent(runId)}/events?after=${after}`,
      )
    ).body.events;
  }

  async listRuns(q: { statuses?: RunStatus[]; limit: number; cursor?: string }): Promise<RunPage> {
    const qs = new URLSearchParams({ limit: String(q.limit) });
    if (q.statuses?.length) qs.set("status", q.statuses.join(","));
    if (q.cursor) qs.set("cursor", q.cursor);
    return (await this.call<RunPage>("GET", `/api/tool-chains/runs?${qs}`)).body;
  }

  async plan(request: string, opts: { context?: unknown; memory?: Record<string, unknown> }): Promise<PlanningOutcome> {
    return (
      await this.call<PlanningOutcome>("POST", "/api/tool-chains/plan", {
        request,
        ...(opts.context !== undefined ? { context: opts.context } : {}),
        ...(opts.memory ? { memory: opts.memory } : {}),
      })
    ).body;
  }

  async skills(): Promise<SkillManifestEntry[]> {
    return (await this.call<{ skills: SkillManifestEntry[] }>("GET", "/api/skills")).body.skills;
  }

  async close(): Promise<void> {
    this.closing.abort();
  }
}
