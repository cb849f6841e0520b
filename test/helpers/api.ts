/**
 * The API on a real port over a real runtime (Postgres: embedded, or the server at DATABASE_URL),
 * with two workspaces, and small HTTP/SSE clients built on fetch.
 */
import { waitFor } from "./wait.js";
import type { AddressInfo } from "node:net";
import { createServer, type Server } from "node:http";
import { cachedAuthenticator } from "../../src/api/auth.js";
import { createApp, serverTimeouts, type ApiApp, type AppOptions } from "../../src/server/app.js";
import { openLive, type Live } from "../../src/live/index.js";
import type { Runtime } from "../../src/runtime/runtime.js";
import type { Database } from "../../src/store/db.js";
import { PgAccessStore } from "../../src/store/pg-access-store.js";
import { MemoryAccessStore, type AccessStore, type KeyPermission } from "../../src/store/access-store.js";

export interface ApiUnderTest {
  url: string;
  runtime: Runtime;
  access: AccessStore;
  live: Live;
  server: Server;
  service: ApiApp["service"];
  close(): Promise<void>;
}

/**
 * Test servers poll their own API in tight loops: far more than the default 600 requests a
 * minute. They get this limit instead, so a 429 never surfaces as a confusing failure elsewhere
 * (the rate-limit test passes its own `limits`).
 */
export const TEST_REQUESTS_PER_MINUTE = 1_000_000;

/** Serve `runtime` (its storage `db`, if any) on 127.0.0.1:<random>. */
export async function serveApi(
  runtime: Runtime,
  db: Database | undefined,
  opts: Partial<AppOptions> & { access?: AccessStore; redisUrl?: string } = {},
): Promise<ApiUnderTest> {
  const access = opts.access ?? (db ? new PgAccessStore(db) : new MemoryAccessStore());
  const live = opts.live ?? (await openLive({ store: runtime.store, db, redisUrl: opts.redisUrl, pollMs: 500 }));
  const api = createApp({
    runtime,
    auth: cachedAuthenticator(access, 0),
    live,
    ready: db ? async () => void (await db.pool.query("SELECT 1")) : undefined,
    onInternalError: (e) => console.error(e),
    ...opts,
    limits: { requestsPerMinute: TEST_REQUESTS_PER_MINUTE, streamsPerKey: 1_000, ...opts.limits },
  });
  const server = createServer(api.app);
  serverTimeouts(server);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    runtime,
    access,
    live,
    server,
    service: api.service,
    async close() {
      await api.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      if (!opts.live) await live.close();
    },
  };
}

export async function newKey(
  access: AccessStore,
  workspace: string,
  skills?: string[],
  permissions?: KeyPermission[],
): Promise<string> {
  await access.ensureWorkspace(workspace, skills ? { allowedSkills: skills } : {});
  return (await access.createKey(workspace, permissions ? { permissions } : {})).key;
}

export interface Reply<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export async function call<T = any>(
  base: string,
  method: string,
  path: string,
  o: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<Reply<T>> {
  const headers: Record<string, string> = { ...(o.key ? { authorization: `Bearer ${o.key}` } : {}), ...o.headers };
  let body: string | undefined;
  if (o.raw !== undefined) body = o.raw;
  else if (o.body !== undefined) {
    body = JSON.stringify(o.body);
    headers["content-type"] ??= "application/json";
  }
  const res = await fetch(base + path, { method, headers, body, signal: o.signal });
  const text = await res.text();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, body: parsed as T, text };
}

export interface SseMessage {
  id?: string;
  event: string;
  data: any;
}

/**
 * An SSE client over fetch: yields parsed messages until the server ends the stream or `signal`
 * aborts. `onOpen` sees the response (status, headers) first.
 */
export async function* sse(
  url: string,
  o: {
    key?: string;
    method?: string;
    body?: unknown;
    headers?: Record<string, string>;
    signal?: AbortSignal;
    onOpen?: (r: Response) => void;
  } = {},
): AsyncGenerator<SseMessage> {
  const headers: Record<string, string> = {
    accept: "text/event-stream",
    ...(o.key ? { authorization: `Bearer ${o.key}` } : {}),
    ...o.headers,
  };
  if (o.body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(url, {
    method: o.method ?? "GET",
    headers,
    body: o.body === undefined ? undefined : JSON.stringify(o.body),
    signal: o.signal,
  });
  o.onOpen?.(res);
  if (!res.body || !(res.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    await res.text().catch(() => undefined);
    return;
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let i: number;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const m: { id?: string; event: string; data: string[] } = { event: "message", data: [] };
        let any = false;
        for (const line of block.split("\n")) {
          if (!line || line.startsWith(":")) continue;
          const c = line.indexOf(":");
          const field = c < 0 ? line : line.slice(0, c);
          const val = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
          if (field === "id") m.id = val;
          else if (field === "event") m.event = val;
          else if (field === "data") m.data.push(val);
          else continue;
          any = true;
        }
        if (any && m.data.length) yield { id: m.id, event: m.event, data: JSON.parse(m.data.join("\n")) };
      }
    }
  } catch (e) {
    if ((e as Error).name !== "AbortError") throw e;
  } finally {
    reader.releaseLock();
  }
}

export async function collectSse(url: string, o: Parameters<typeof sse>[1] = {}): Promise<SseMessage[]> {
  const out: SseMessage[] = [];
  for await (const m of sse(url, o)) out.push(m);
  return out;
}

/** `waitFor` with a boolean predicate and a deadline (kept for the API tests' brevity). */
export const until = async (pred: () => Promise<boolean> | boolean, ms = 10_000, what = "condition"): Promise<void> => {
  await waitFor(pred, { timeoutMs: ms, what });
};
