/**
 * README promises about event streams and server logs, over real HTTP:
 * - a stream reader that does not keep up is closed at 1 MiB unread (a reader that keeps up is not);
 * - `toolchain_sse_clients` counts the open event streams, up and down;
 * - an internal error from Postgres is logged as its SQLSTATE, routine, schema objects, route
 *   (and run id), never its message or detail, which quote values.
 */
import { connect } from "node:net";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import express from "express";
import { afterAll, beforeAll, describe, expect, test, vi } from "vitest";
import { SseStream } from "../src/api/sse.js";
import type { RunEvent } from "../src/kernel/events.js";
import type { Runtime } from "../src/runtime/runtime.js";
import type { Database } from "../src/store/db.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, newKey, serveApi } from "./helpers/api.js";
import { Gates, gateSkill } from "./helpers/skills.js";
import { waitFor } from "./helpers/wait.js";

const MiB = 1024 * 1024;

describe("a stream reader that does not keep up", () => {
  /** An SSE endpoint with the product's defaults that writes 64 KiB events, one per turn of the event loop, until closed. */
  let server: Server;
  let port: number;
  const ends: { closedAt: number | null; written: number; bufferedAtClose: number }[] = [];
  const FRAME = 64 * 1024;
  const TOTAL = 6 * MiB;
  beforeAll(async () => {
    const app = express();
    app.get("/s", (_req, res) => {
      const sse = new SseStream(res, { heartbeatMs: 60_000 });
      const out = { closedAt: null as number | null, written: 0, bufferedAtClose: 0 };
      ends.push(out);
      let seq = 0;
      const pad = "x".repeat(FRAME);
      const next = () => {
        if (sse.closed) {
          out.closedAt = seq;
          return;
        }
        if (out.written >= TOTAL) return sse.end();
        sse.event({ runId: "r", seq: ++seq, type: "step_completed", at: "", data: { pad } } as unknown as RunEvent);
        out.written += FRAME;
        if (sse.closed) out.bufferedAtClose = res.writableLength;
        setImmediate(next);
      };
      setImmediate(next);
    });
    server = createServer(app);
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  test("is closed once more than 1 MiB is buffered unread; a reader that keeps up gets everything", async () => {
    // a reader that keeps up: 6 MiB in 64 KiB events, never closed early
    const res = await fetch(`http://127.0.0.1:${port}/s`);
    const body = await res.text();
    expect(body.match(/^id: /gm)).toHaveLength(TOTAL / FRAME);
    expect(ends[0]!.closedAt).toBeNull();

    // a reader that stops reading: the socket's buffers fill, then Node's, and the stream is cut
    const sock = connect(port, "127.0.0.1");
    await new Promise<void>((r) => sock.once("connect", () => r()));
    sock.write(`GET /s HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n`);
    sock.pause();
    try {
      await waitFor(() => ends[1]?.closedAt != null, { timeoutMs: 20_000, what: "the slow reader's stream closed" });
      const slow = ends[1]!;
      // cut by the event that took the unread buffer past 1 MiB, not before, not later
      expect(slow.bufferedAtClose).toBeGreaterThan(MiB);
      expect(slow.bufferedAtClose).toBeLessThanOrEqual(MiB + FRAME + 1024);
      expect(slow.written).toBeLessThan(TOTAL);
    } finally {
      sock.destroy();
    }
  });
});

describe(`open event streams and Postgres error logs (${postgresBackend.name})`, () => {
  const gates = new Gates();
  let runtime: Runtime;
  let db: Database | undefined;
  let schema: string | undefined;
  let close: () => Promise<void>;
  beforeAll(async () => {
    const o = await postgresBackend.open({ skills: [gateSkill(gates, new Map())] });
    [runtime, db, schema, close] = [o.runtime, o.db, o.schema, o.close];
  }, 180_000);
  afterAll(async () => {
    gates.open("hold");
    await close?.();
  });

  test("toolchain_sse_clients counts open event streams: 0, 1, 2, 1, 0", async () => {
    const api = await serveApi(runtime, db);
    try {
      const key = await newKey(api.access, "ws-sse");
      const metric = async () =>
        Number(/^toolchain_sse_clients (\d+)$/m.exec((await call(api.url, "GET", "/metrics")).text)![1]);
      const r = await call(api.url, "POST", "/api/tool-chains/run", {
        key,
        body: { wait: false, plan: { steps: [{ stepId: "s", skillName: "test.gate", arguments: { gate: "hold" } }] } },
      });
      const runId = r.body.runId as string;
      expect(await metric()).toBe(0);
      const open = async () => {
        const ac = new AbortController();
        const res = await fetch(`${api.url}/api/tool-chains/runs/${runId}/events`, {
          headers: { authorization: `Bearer ${key}`, accept: "text/event-stream" },
          signal: ac.signal,
        });
        expect(res.status).toBe(200);
        return ac;
      };
      const s1 = await open();
      await waitFor(async () => (await metric()) === 1, { what: "one stream counted" });
      const s2 = await open();
      await waitFor(async () => (await metric()) === 2, { what: "two streams counted" });
      s1.abort();
      await waitFor(async () => (await metric()) === 1, { what: "one stream left" });
      s2.abort();
      await waitFor(async () => (await metric()) === 0, { what: "no stream left" });
    } finally {
      gates.open("hold");
      await api.close();
    }
  });

  test.runIf(postgresBackend.name !== "memory")(
    "a Postgres error answering 500 is logged by SQLSTATE, routine and schema objects, never its message or detail",
    async () => {
      // a trigger that refuses new runs with the values in its message and detail, as constraint errors do
      await db!.pool.query(`CREATE FUNCTION "${schema}".refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'refused secret-%', NEW.run_id USING DETAIL = 'detail secret-value', ERRCODE = '23514',
          TABLE = 'tool_chain_runs', COLUMN = 'plan', CONSTRAINT = 'no_runs'; END $$`);
      await db!.pool.query(
        `CREATE TRIGGER refuse BEFORE INSERT ON "${schema}".tool_chain_runs FOR EACH ROW EXECUTE FUNCTION "${schema}".refuse()`,
      );
      const logged = vi.spyOn(console, "error").mockImplementation(() => undefined);
      // the product's default log (no onInternalError given)
      const api = await serveApi(runtime, db, { onInternalError: undefined });
      try {
        const key = await newKey(api.access, "ws-pglog");
        const r = await call(api.url, "POST", "/api/tool-chains/run", {
          key,
          body: { plan: { steps: [{ stepId: "s", skillName: "core.pass", arguments: { value: "secret-arg" } }] } },
        });
        expect(r.status).toBe(500);
        expect(r.body).toEqual({ error: { code: "INTERNAL", message: "internal error" } });
        const lines = logged.mock.calls.map((c) => c.map(String).join(" "));
        const line = lines.find((l) => l.includes("internal error"));
        expect(line, lines.join("\n")).toBeDefined();
        const info = JSON.parse(line!.slice(line!.indexOf("{")));
        expect(info).toEqual({
          method: "POST",
          route: "/api/tool-chains/run",
          postgres: {
            code: "23514",
            routine: expect.any(String),
            table: "tool_chain_runs",
            column: "plan",
            constraint: "no_runs",
          },
        });
        expect(lines.join("\n")).not.toContain("secret");
      } finally {
        logged.mockRestore();
        await api.close();
        await db!.pool.query(`DROP TRIGGER refuse ON "${schema}".tool_chain_runs`);
      }
    },
  );
});
