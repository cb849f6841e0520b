/**
 * Server-sent events: `id:` = the event's seq, `event:` = its type, `data:` = the event as JSON
 * (runId, seq, type, stepId?, at, data). A comment every `heartbeatMs` keeps proxies from closing
 * an idle stream; `signal` aborts when the client goes away.
 */
import type { Response } from "express";
import type { RunEvent } from "../kernel/events.js";
import type { FollowOptions, RunFeeds } from "../live/feeds.js";
import { toErrorBody } from "./errors.js";

export interface SseOptions {
  /** @default 15000 */
  heartbeatMs?: number;
  /** Reconnection delay suggested to EventSource clients. @default 1000 */
  retryMs?: number;
  /**
   * A stream with no event for this long is closed (comments do not count); an EventSource
   * reconnects with Last-Event-ID and resumes where it was. Bounds what an abandoned follower of
   * a run that waits for days costs. 0: never. @default 300000
   */
  idleMs?: number;
  /** A client that lets this many bytes pile up unread is cut off (it resumes with Last-Event-ID). @default 1 MiB */
  maxBufferedBytes?: number;
}

/** One serialisation per event, however many streams it goes to (a feed hands all of them the same object). */
const frames = new WeakMap<RunEvent, string>();
function frameOf(e: RunEvent): string {
  let f = frames.get(e);
  if (f === undefined) {
    const data: Record<string, unknown> = { runId: e.runId, seq: e.seq, type: e.type };
    if (e.stepId !== undefined) data.stepId = e.stepId;
    data.at = e.at;
    data.data = e.data;
    f = `id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify(data)}\n\n`;
    frames.set(e, f);
  }
  return f;
}

export class SseStream {
  private readonly ac = new AbortController();
  private readonly heartbeat: NodeJS.Timeout;
  private idle: NodeJS.Timeout | undefined;
  private readonly idleMs: number;
  private readonly maxBuffered: number;
  private ended = false;

  constructor(
    private readonly res: Response,
    opts: SseOptions = {},
  ) {
    res.status(200);
    res.setHeader("Content-Type", "text/event-stream; charset=utf-8");
    res.setHeader("Cache-Control", "no-store, no-transform");
    res.setHeader("Connection", "keep-alive");
    res.setHeader("X-Accel-Buffering", "no");
    res.flushHeaders();
    res.socket?.setNoDelay(true);
    res.write(`retry: ${opts.retryMs ?? 1_000}\n\n`);
    res.on("close", () => this.end());
    this.heartbeat = setInterval(() => this.res.write(": ping\n\n"), opts.heartbeatMs ?? 15_000);
    this.heartbeat.unref();
    this.idleMs = opts.idleMs ?? 300_000;
    this.maxBuffered = opts.maxBufferedBytes ?? 1024 * 1024;
    this.touch();
  }

  private touch(): void {
    if (this.idleMs <= 0) return;
    clearTimeout(this.idle);
    this.idle = setTimeout(() => this.end(), this.idleMs);
    this.idle.unref();
  }

  /** Aborted when the client disconnects or the stream ends. */
  get signal(): AbortSignal {
    return this.ac.signal;
  }

  get closed(): boolean {
    return this.ended;
  }

  event(e: RunEvent): void {
    if (this.ended) return;
    // events delivered in one tick leave in one write
    if (!this.corked) {
      this.corked = true;
      this.res.cork();
      process.nextTick(() => {
        this.corked = false;
        this.res.uncork();
      });
    }
    this.res.write(frameOf(e));
    this.touch();
    // a reader that does not keep up is not buffered for without bound
    if (this.res.writableLength > this.maxBuffered) this.end();
  }
  private corked = false;

  /** A failure after the stream started: the error body as an `error` event. */
  error(e: unknown): void {
    if (this.ended) return;
    this.res.write(`event: error\ndata: ${JSON.stringify(toErrorBody(e).body)}\n\n`);
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.heartbeat);
    clearTimeout(this.idle);
    this.ac.abort();
    if (!this.res.writableEnded) this.res.end();
  }
}

/** Writes a run's events from the feeds until the run stops as `until` says or the client leaves. */
export function streamFeed(
  sse: SseStream,
  feeds: RunFeeds,
  runId: string,
  opts: Omit<FollowOptions, "signal">,
): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = feeds.listen(
      runId,
      opts,
      (e) => sse.event(e),
      (error) => {
        if (error !== undefined) sse.error(error);
        sse.end();
        resolve();
      },
    );
    sse.signal.addEventListener(
      "abort",
      () => {
        stop();
        resolve();
      },
      { once: true },
    );
  });
}

/** Writes events until the iterable ends, the client leaves or `stop` aborts; then ends the response. */
export async function pipeEvents(sse: SseStream, events: AsyncIterable<RunEvent>): Promise<void> {
  const it = events[Symbol.asyncIterator]();
  const left = new Promise<IteratorResult<RunEvent>>((resolve) =>
    sse.signal.addEventListener("abort", () => resolve({ done: true, value: undefined }), { once: true }),
  );
  try {
    for (;;) {
      const r = await Promise.race([it.next(), left]);
      if (r.done) break;
      sse.event(r.value);
    }
  } catch (e) {
    sse.error(e);
  } finally {
    sse.end();
    void it.return?.();
  }
}
