/**
 * MCP capacity and decision bounds with the official SDK client over real HTTP (random port,
 * Postgres: embedded or DATABASE_URL): session quotas per key and workspace (the key's oldest idle
 * session closed first, another workspace never locked out), open GET streams counted with the
 * event streams and never keeping a session alive, JSON-RPC batches refused, and a late
 * elicitation answer refused instead of applied to a later wait of the same step.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, newKey, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { callTool, mcpClient } from "./helpers/mcp.js";
import { effectSkill, EffectLedger } from "./helpers/skills.js";
import { waitFor } from "./helpers/wait.js";
import { admitSession } from "../src/mcp/session-quota.js";

const waitPlan = (ms: number) => ({ steps: [{ stepId: "w", skillName: "core.wait", arguments: { ms } }] });
const alive = async (c: Client) => {
  try {
    await c.listTools();
    return true;
  } catch {
    return false;
  }
};
const sessionOf = (c: Client) => (c.transport as StreamableHTTPClientTransport).sessionId!;

describe("session admission (pure)", () => {
  const q = { perKey: 2, perWorkspace: 3, total: 4 };
  const s = (id: string, keyId: string, workspaceId: string, lastSeen: number, busy = 0) => ({
    id,
    keyId,
    workspaceId,
    lastSeen,
    busy,
  });
  test("the key's oldest idle session makes room; a busy one never", () => {
    expect(admitSession([s("a", "k1", "w", 2), s("b", "k1", "w", 1)], { keyId: "k1", workspaceId: "w" }, q)).toEqual({
      ok: true,
      evict: ["b"],
    });
    expect(admitSession([s("a", "k1", "w", 2), s("b", "k1", "w", 1, 1)], { keyId: "k1", workspaceId: "w" }, q)).toEqual(
      { ok: true, evict: ["a"] },
    );
    expect(
      admitSession([s("a", "k1", "w", 2, 1), s("b", "k1", "w", 1, 1)], { keyId: "k1", workspaceId: "w" }, q),
    ).toEqual({ ok: false, scope: "key", limit: 2 });
  });
  test("the workspace's quota takes the key's own first, then the workspace's; the process's cap never another workspace's", () => {
    const ws = [s("x", "k2", "w", 0), s("a", "k1", "w", 5), s("b", "k2", "w", 1)];
    expect(admitSession(ws, { keyId: "k1", workspaceId: "w" }, q)).toEqual({ ok: true, evict: ["a"] });
    expect(
      admitSession(
        [s("x", "k2", "w", 0), s("b", "k2", "w", 1), s("c", "k3", "w", 3)],
        { keyId: "k1", workspaceId: "w" },
        q,
      ),
    ).toEqual({ ok: true, evict: ["x"] });
    const full = [s("1", "k1", "w1", 0), s("2", "k1", "w1", 0), s("3", "k2", "w2", 0), s("4", "k2", "w2", 0)];
    expect(admitSession(full, { keyId: "k3", workspaceId: "w3" }, q)).toEqual({
      ok: false,
      scope: "process",
      limit: 4,
    });
    expect(admitSession(full, { keyId: "k1", workspaceId: "w1" }, q)).toEqual({ ok: true, evict: ["1"] });
  });
});

describe(`MCP bounds over HTTP on ${postgresBackend.name}`, () => {
  let api: ApiUnderTest;
  let quick: ApiUnderTest; // same runtime, sessions idle after 300 ms
  let ledger: EffectLedger;
  let close: () => Promise<void>;
  const clients: Client[] = [];
  const connect = async (...a: Parameters<typeof mcpClient>) => {
    const c = await mcpClient(...a);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    ledger = new EffectLedger();
    const o = await postgresBackend.open({
      skills: [effectSkill(ledger, { name: "test.undo_fails", compensationFailures: Number.POSITIVE_INFINITY })],
    });
    api = await serveApi(o.runtime, o.db, {
      mcp: { maxSessionsPerKey: 2, maxSessionsPerWorkspace: 3, maxSessions: 100 },
      limits: { streamsPerKey: 1 },
    });
    quick = await serveApi(o.runtime, o.db, {
      live: api.live,
      access: api.access,
      mcp: { sessionIdleMs: 300 },
      limits: { streamsPerKey: 1 },
    });
    close = async () => {
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
      await quick.close();
      await api.close();
      await o.close();
    };
  });
  afterAll(() => close?.());

  test("per-key quota: the key's oldest idle session is closed for a new one; with all busy, 429 TOO_MANY_SESSIONS", async () => {
    const k = await newKey(api.access, "ws-sess-a");
    const c1 = await connect(api.url, k);
    const c2 = await connect(api.url, k);
    await c2.listTools(); // c1 is the oldest idle now
    const c3 = await connect(api.url, k);
    expect([await alive(c1), await alive(c2), await alive(c3)]).toEqual([false, true, true]);
    // both sessions answering a call: nothing idle to close
    const busy = [
      callTool(c2, "run_tool_chain", { plan: waitPlan(2_000) }),
      callTool(c3, "run_tool_chain", { plan: waitPlan(2_000) }),
    ];
    await new Promise((r) => setTimeout(r, 300));
    const refused = await connect(api.url, k).then(
      () => "connected",
      (e: Error) => e.message,
    );
    expect(refused).toContain('"code":"TOO_MANY_SESSIONS","scope":"key"');
    expect(refused).toContain("Too many open MCP sessions for this key (the limit is 2, none idle to close)");
    expect((await Promise.all(busy)).map((r) => r.data.status)).toEqual(["completed", "completed"]);
  });

  test("per-workspace quota: one workspace cannot fill the server; another's initialize still succeeds", async () => {
    const keys = await Promise.all([1, 2, 3].map(() => newKey(api.access, "ws-sess-fill")));
    const opened: Client[] = [];
    for (const k of keys) for (let i = 0; i < 2; i++) opened.push(await connect(api.url, k));
    // 6 initializes, a workspace quota of 3: the workspace's oldest idle ones were closed
    const up = await Promise.all(opened.map(alive));
    expect(up.filter(Boolean)).toHaveLength(3);
    const other = await connect(api.url, await newKey(api.access, "ws-sess-other"));
    expect(await alive(other)).toBe(true);
  });

  test("an open GET stream takes one of the key's event-stream slots, and does not keep an idle session alive", async () => {
    const k = await newKey(quick.access, "ws-sess-stream");
    const run = await call(quick.url, "POST", "/api/tool-chains/run", {
      key: k,
      body: { plan: { steps: [{ stepId: "p", skillName: "core.wait", arguments: { ms: 60_000 } }] }, wait: false },
    });
    const runId = run.body.runId as string;
    const eventsStatus = async () => {
      const ctl = new AbortController();
      const r = await fetch(`${quick.url}/api/tool-chains/runs/${runId}/events`, {
        headers: { authorization: `Bearer ${k}`, accept: "text/event-stream" },
        signal: ctl.signal,
      });
      const out: { status: number; body?: any } = {
        status: r.status,
        body: r.status === 429 ? await r.json() : undefined,
      };
      ctl.abort();
      await r.body?.cancel().catch(() => undefined);
      return out;
    };
    const openStreams = async () =>
      Number(/^toolchain_sse_clients (\d+)$/m.exec(await (await fetch(`${quick.url}/metrics`)).text())![1]);
    const c = await connect(quick.url, k);
    const id = sessionOf(c);
    // the client opens its GET stream after initialize: counted with the event streams, it takes the key's one slot
    await waitFor(async () => (await openStreams()) === 1);
    const refused = await eventsStatus();
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe("TOO_MANY_STREAMS");
    // no requests for longer than sessionIdleMs: the session is closed, stream and all, and the slot is free
    // (watched through the metrics, which are no request on the session)
    await waitFor(async () => (await openStreams()) === 0, { intervalMs: 50 });
    const r = await fetch(`${quick.url}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${k}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": id,
        "mcp-protocol-version": "2025-06-18",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(r.status).toBe(404);
    expect(((await r.json()) as any).error.message).toBe("Session not found");
    expect((await eventsStatus()).status).toBe(200);
    await call(quick.url, "POST", `/api/tool-chains/runs/${runId}/cancel`, { key: k, body: {} });
  });

  test("a JSON-RPC batch is refused with one JSON-RPC error: 40 run_tool_chain calls create no run", async () => {
    const k = await newKey(api.access, "ws-batch");
    const c = await connect(api.url, k);
    const batch = Array.from({ length: 40 }, (_, i) => ({
      jsonrpc: "2.0",
      id: i + 1,
      method: "tools/call",
      params: { name: "run_tool_chain", arguments: { plan: waitPlan(0) } },
    }));
    const r = await fetch(`${api.url}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${k}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": sessionOf(c),
        "mcp-protocol-version": "2025-06-18",
      },
      body: JSON.stringify(batch),
    });
    expect(r.status).toBe(400);
    expect(await r.json()).toEqual({
      jsonrpc: "2.0",
      error: {
        code: -32600,
        message: "Invalid Request: JSON-RPC batches are not supported; send one request per HTTP POST",
      },
      id: null,
    });
    expect((await call(api.url, "GET", "/api/tool-chains/runs", { key: k })).body.runs).toEqual([]);
    expect(await alive(c)).toBe(true);
  });

  test("a late elicitation accept is refused (CONFIRMATION_NOT_PENDING), never applied to a later wait of the same step", async () => {
    const k = await newKey(api.access, "ws-rounds");
    // pub waits for confirmation (round 0); once approved and run, boom fails and pub's compensation
    // fails: pub waits again, for a compensation decision (another round)
    const plan = {
      onFailure: "fail_fast",
      rollbackMode: "strict",
      steps: [
        { stepId: "pub", skillName: "test.undo_fails", requireConfirmation: true, arguments: { label: "pub" } },
        { stepId: "boom", skillName: "core.fail", dependsOn: ["pub"], retry: { maxAttempts: 1 } },
      ],
    };
    const asked: number[] = [];
    let compensationRound: number | undefined;
    const c = await connect(api.url, k, {
      elicit: async (q) => {
        const runId = /run (\S+) waits/.exec(q.message)![1]!;
        const before = (await call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key: k })).body;
        asked.push(before.pendingConfirmations[0].round);
        // answered elsewhere meanwhile (the REST API, for this round): the run moves on to the compensation wait
        const r = await call(api.url, "POST", `/api/tool-chains/runs/${runId}/confirm`, {
          key: k,
          body: { stepId: "pub", decision: "approve", round: before.pendingConfirmations[0].round },
        });
        expect(r.status).toBe(200);
        const waiting = r.body.pendingConfirmations.find((p: { stepId: string }) => p.stepId === "pub");
        expect(waiting).toMatchObject({ kind: "compensation" });
        compensationRound = waiting.round;
        return { action: "accept" }; // the late answer to the first question
      },
    });
    const res = await callTool(c, "run_tool_chain", { plan });
    expect(asked).toEqual([0]);
    const pub = res.data.pending.find((p: { stepId: string }) => p.stepId === "pub");
    // still waiting for the compensation decision, in the same round: the accept did not retry the compensation
    expect(pub).toMatchObject({ kind: "compensation", round: compensationRound });
    expect(compensationRound).not.toBe(0);
    const runId = res.data.runId as string;
    expect(ledger.effects.get(`${runId}:pub`)).toBe(1);
    const events = (await call(api.url, "GET", `/api/tool-chains/runs/${runId}/events`, { key: k })).body.events as {
      type: string;
      stepId?: string;
    }[];
    expect(events.filter((e) => e.type === "step_rollback_failed" && e.stepId === "pub")).toHaveLength(1);
    // confirm_tool_chain_step with a stale round is refused the same way
    const stale = await callTool(c, "confirm_tool_chain_step", { runId, stepId: "pub", decision: "approve", round: 0 });
    expect(stale.result.isError).toBe(true);
    expect(stale.data.error.code).toBe("CONFIRMATION_NOT_PENDING");
    // and with the round shown, it applies
    const skip = await callTool(c, "confirm_tool_chain_step", {
      runId,
      stepId: "pub",
      decision: "skip",
      round: compensationRound,
    });
    expect(skip.data.pending).toEqual([]);
  });
});
