/**
 * Following a run's events live: one feed per followed run in this process, however many
 * clients follow it (SSE fan-out reads the store once per change, not once per client).
 *
 * A feed reads `store.list(runId, cursor)` when a signal says the run moved past its cursor,
 * and on a slow poll (lost hints, no transport). Events are numbered per run by the store in
 * commit order, so "everything after my last seq" never has gaps and deduplicates by seq.
 * A follower that starts behind the feed catches up from the store first, buffering live
 * deliveries meanwhile.
 */
import { Channel } from "../kernel/channel.js";
import type { RunEvent } from "../kernel/events.js";
import { TERMINAL_RUN, type RunStatus } from "../kernel/status.js";
import type { RunStore } from "../store/run-store.js";
import type { RunSignals } from "./signals.js";

/** terminal: until the run is finished for good; settled: also stop when it waits for a decision. */
export type FollowUntil = "terminal" | "settled";

export interface FollowOptions {
  /** Deliver events with seq > after. */
  after: number;
  until: FollowUntil;
  signal?: AbortSignal;
}

export interface FeedsOptions {
  /** Safety-net poll of each followed run. @default 1000 */
  pollMs?: number;
}

/** Event types after which a run may have stopped (checked against the run row). */
const MAY_END = new Set<string>([
  "run_completed",
  "run_failed",
  "run_waiting_confirmation",
  "rollback_waiting_decision",
]);

export function hasEnded(until: FollowUntil, status: RunStatus, pending: number): boolean {
  if (until === "settled") return TERMINAL_RUN.has(status) || status === "waiting_confirmation";
  return TERMINAL_RUN.has(status) && pending === 0;
}

interface Sub {
  onEvent: (e: RunEvent) => void;
  onEnd: (error?: unknown) => void;
  last: number;
  until: FollowUntil;
  catchingUp: boolean;
  held: RunEvent[];
  done: boolean;
}

class Feed {
  readonly subs = new Set<Sub>();
  private reading: Promise<void> | undefined;
  private again = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    readonly runId: string,
    private cursor: number,
    private readonly store: Pick<RunStore, "list" | "getRow">,
    pollMs: number,
    private readonly dispose: () => void,
  ) {
    this.timer = setInterval(() => void this.read(true), pollMs);
    this.timer.unref();
    // the cursor came from the first follower: never past the end of the log, or a follower
    // that claims more than exists (a Last-Event-ID from elsewhere) would hide every live event
    // from everyone else on this run. Read before the first list, so nothing appended after is missed.
    this.clamped = store.getRow(runId).then(
      (row) => void (row && row.lastSeq < this.cursor && (this.cursor = row.lastSeq)),
      () => undefined,
    );
  }
  private readonly clamped: Promise<void>;

  hint(seq: number): void {
    if (seq > this.cursor) void this.read(false);
  }

  add(sub: Sub): void {
    this.subs.add(sub);
    if (sub.last < this.cursor) void this.catchUp(sub);
    void this.read(false);
  }

  remove(sub: Sub): void {
    if (sub.done) return;
    sub.done = true;
    this.subs.delete(sub);
    sub.onEnd();
    if (!this.subs.size) {
      clearInterval(this.timer);
      this.dispose();
    }
  }

  /** Reads everything after the cursor; concurrent calls coalesce into one more round. */
  read(poll: boolean): Promise<void> {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = (async () => {
      await this.clamped;
      let checkRow = poll;
      do {
        this.again = false;
        const events = await this.store.list(this.runId, this.cursor);
        for (const e of events) {
          if (e.seq <= this.cursor) continue;
          this.cursor = e.seq;
          for (const s of this.subs) this.deliver(s, e);
        }
        if (events.some((e) => MAY_END.has(e.type))) checkRow = true;
        else if (events.length) checkRow = false;
      } while (this.again);
      if (checkRow) await this.checkEnd();
    })()
      .catch(() => undefined) // the database is unreachable: the next poll retries
      .finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async catchUp(sub: Sub): Promise<void> {
    sub.catchingUp = true;
    try {
      const events = await this.store.list(this.runId, sub.last);
      for (const e of events) this.push(sub, e);
      for (const e of sub.held.splice(0)) this.push(sub, e);
    } catch (e) {
      if (!sub.done) {
        sub.done = true;
        this.subs.delete(sub);
        sub.onEnd(e);
      }
      return;
    } finally {
      sub.catchingUp = false;
    }
    await this.checkEnd();
  }

  private deliver(sub: Sub, e: RunEvent): void {
    if (sub.catchingUp) sub.held.push(e);
    else this.push(sub, e);
  }

  private push(sub: Sub, e: RunEvent): void {
    if (sub.done || e.seq <= sub.last) return;
    sub.last = e.seq;
    sub.onEvent(e);
  }

  /** Ends the followers that have seen the run's last event, if the run stopped as they wait for. */
  private async checkEnd(): Promise<void> {
    const row = await this.store.getRow(this.runId).catch(() => undefined);
    if (!row) return;
    for (const s of [...this.subs]) {
      if (!s.catchingUp && s.last >= row.lastSeq && hasEnded(s.until, row.status, row.pendingConfirmations.length))
        this.remove(s);
    }
  }
}

export class RunFeeds {
  private readonly feeds = new Map<string, Feed>();
  private readonly unsubscribe: () => void;
  private readonly pollMs: number;

  constructor(
    private readonly store: Pick<RunStore, "list" | "getRow">,
    signals: RunSignals,
    opts: FeedsOptions = {},
  ) {
    this.pollMs = opts.pollMs ?? 1_000;
    this.unsubscribe = signals.subscribe(
      (runId, seq) => this.feeds.get(runId)?.hint(seq),
      () => {
        for (const f of this.feeds.values()) void f.read(true);
      },
    );
  }

  /**
   * Calls `onEvent` synchronously for each of the run's events after `opts.after`, in order, live,
   * then `onEnd` once (with an error if the store failed during catch-up) when the run stops as
   * `until` says, or when the returned function is called. Synchronous delivery keeps fan-out to
   * many streams cheap: one read, then plain calls.
   */
  listen(
    runId: string,
    opts: Omit<FollowOptions, "signal">,
    onEvent: (e: RunEvent) => void,
    onEnd: (error?: unknown) => void,
  ): () => void {
    let feed = this.feeds.get(runId);
    if (!feed) {
      const f: Feed = new Feed(runId, opts.after, this.store, this.pollMs, () => {
        if (this.feeds.get(runId) === f) this.feeds.delete(runId);
      });
      this.feeds.set(runId, (feed = f));
    }
    const sub: Sub = { onEvent, onEnd, last: opts.after, until: opts.until, catchingUp: false, held: [], done: false };
    const f = feed;
    f.add(sub);
    return () => f.remove(sub);
  }

  /** `listen` as an async iterable (ends when the run stops as `until` says, or on abort). */
  follow(runId: string, opts: FollowOptions): AsyncIterable<RunEvent> {
    const out = new Channel<RunEvent>();
    if (opts.signal?.aborted) {
      out.close();
      return out;
    }
    const stop = this.listen(
      runId,
      opts,
      (e) => out.push(e),
      (error) => (error === undefined ? out.close() : out.fail(error)),
    );
    opts.signal?.addEventListener("abort", stop, { once: true });
    return out;
  }

  /** Followers per run, for metrics and tests. */
  get size(): number {
    return this.feeds.size;
  }

  close(): void {
    this.unsubscribe();
    for (const f of [...this.feeds.values()]) for (const s of [...f.subs]) f.remove(s);
  }
}
