/**
 * Follows a run's events over SSE. EventSource cannot send an Authorization header, so this reads
 * the stream with fetch (parsed by eventsource-parser) and reconnects like EventSource does,
 * sending Last-Event-ID so the server resumes after the last event seen. A 204 means the run is
 * finished and everything was delivered.
 */
import { createParser } from "eventsource-parser";
import type { Api } from "./api.js";
import type { RunEvent } from "./model/types.js";

export type FollowState = "connecting" | "live" | "reconnecting" | "ended" | "error";

export interface Follower {
  close(): void;
  /** Reconnect now (e.g. after a decision revived a finished stream). */
  poke(): void;
}

export function followRun(
  api: Api,
  runId: string,
  after: number,
  on: { event(e: RunEvent): void; state(s: FollowState, detail?: string): void },
): Follower {
  let last = after;
  return followStream(
    api,
    () => ({
      path: `/api/tool-chains/runs/${encodeURIComponent(runId)}/events?after=${last}`,
      lastEventId: String(last),
    }),
    (e) => {
      if (typeof e.seq !== "number" || e.seq <= last) return false;
      last = e.seq;
      on.event(e);
      return true;
    },
    on.state,
  );
}

/**
 * The workspace's decision and wait events, every run on one stream (the inbox's rows). It does
 * not resume: `state("live")` after a reconnect is the caller's cue to reload what it shows.
 */
export function followDecisions(
  api: Api,
  on: { event(e: RunEvent): void; state(s: FollowState, detail?: string): void },
): Follower {
  return followStream(
    api,
    () => ({ path: "/api/tool-chains/decisions/events" }),
    (e) => (on.event(e), true),
    on.state,
  );
}

/** One SSE connection kept open: `take` sees each parsed event and says whether it was new. */
function followStream(
  api: Api,
  target: () => { path: string; lastEventId?: string },
  take: (e: RunEvent) => boolean,
  state: (s: FollowState, detail?: string) => void,
): Follower {
  let closed = false;
  let ctrl: AbortController | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let retryMs = 1_000;
  let failures = 0;

  const schedule = (ms: number) => {
    clearTimeout(timer);
    if (!closed) timer = setTimeout(() => void connect(), ms);
  };

  async function connect(): Promise<void> {
    if (closed) return;
    ctrl?.abort();
    const mine = (ctrl = new AbortController());
    state(failures ? "reconnecting" : "connecting");
    let got = 0;
    try {
      const t = target();
      const res = await fetch(t.path, {
        headers: api.headers({
          accept: "text/event-stream",
          ...(t.lastEventId !== undefined ? { "last-event-id": t.lastEventId } : {}),
        }),
        signal: mine.signal,
        cache: "no-store",
      });
      if (res.status === 204) {
        state("ended");
        return;
      }
      if (!res.ok || !res.body) {
        const text = await res.text().catch(() => "");
        if (res.status === 401 || res.status === 404) {
          state("error", `${res.status}: ${text.slice(0, 200)}`);
          return;
        }
        throw new Error(`HTTP ${res.status}`);
      }
      state("live");
      failures = 0;
      const parser = createParser({
        onEvent(m) {
          if (m.event === "error") {
            state("error", m.data);
            return;
          }
          let e: RunEvent;
          try {
            e = JSON.parse(m.data) as RunEvent;
          } catch {
            return;
          }
          if (take(e)) got++;
        },
        onRetry(ms) {
          retryMs = ms;
        },
      });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.feed(value);
      }
    } catch (e) {
      if (mine.signal.aborted || closed) return;
      failures++;
    }
    if (closed || mine !== ctrl) return;
    // the server ends the stream when the run is terminal: reconnecting answers 204 then
    schedule(got > 0 ? retryMs : Math.min(10_000, retryMs * 2 ** Math.min(failures, 4)));
    if (got === 0) failures++;
  }

  void connect();
  return {
    close() {
      closed = true;
      clearTimeout(timer);
      ctrl?.abort();
    },
    poke() {
      failures = 0;
      schedule(0);
    },
  };
}
