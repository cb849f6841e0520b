/**
 * With REDIS_URL: the run-view cache (hit, invalidated by every change, workspace-checked) and
 * Redis pub/sub carrying live hints between processes. Skipped without REDIS_URL (CI sets it on
 * the server pass).
 */
import { createConnection, createServer, type Server } from "node:net";
import { describe, expect, test } from "vitest";
import { RedisSignalTransport } from "../src/live/redis.js";
import { RunSignals } from "../src/live/signals.js";
import { MemoryRunStore } from "../src/store/memory-run-store.js";
import { freshSchema, postgresBackend } from "./helpers/backends.js";
import { call, collectSse, newKey, serveApi } from "./helpers/api.js";
import { approvalSkill, EffectLedger } from "./helpers/skills.js";
import { waitFor } from "./helpers/wait.js";

const redisUrl = process.env.REDIS_URL || undefined;

describe.runIf(redisUrl)(`Redis (${postgresBackend.name})`, () => {
  test("GET /runs/:id is served from the cache until the run changes; another workspace still gets 404", async () => {
    const o = await postgresBackend.open({ skills: [approvalSkill(new EffectLedger())] });
    const api = await serveApi(o.runtime, o.db, { redisUrl });
    try {
      expect(api.live.transport).toBe("redis");
      const key = await newKey(api.access, "ws-r");
      const other = await newKey(api.access, "ws-other");
      const { runId } = (
        await call(api.url, "POST", "/api/tool-chains/run", {
          key,
          body: { plan: { steps: [{ stepId: "p", skillName: "test.publish", arguments: { title: "cached" } }] } },
        })
      ).body;
      const get = (k = key) => call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key: k });
      const first = await get();
      expect([first.headers.get("x-cache"), first.body.status]).toEqual(["miss", "waiting_confirmation"]);
      const second = await get();
      expect([second.headers.get("x-cache"), second.body]).toEqual(["hit", first.body]);
      expect((await get(other)).status).toBe(404);
      await call(api.url, "POST", `/api/tool-chains/runs/${runId}/confirm`, {
        key,
        body: { stepId: "p", decision: "approve" },
      });
      const after = await get();
      expect([after.headers.get("x-cache"), after.body.status]).toEqual(["miss", "completed"]);
      expect((await get()).headers.get("x-cache")).toBe("hit");
      // live events travel over Redis too
      const events = await collectSse(`${api.url}/api/tool-chains/runs/${runId}/events`, { key });
      expect(events.at(-1)!.event).toBe("run_completed");
    } finally {
      await api.close();
      await o.close();
    }
  });

  test("pub/sub: a change committed in one process signals the others, not itself twice", async () => {
    const namespace = freshSchema("redis");
    const storeA = new MemoryRunStore();
    const storeB = new MemoryRunStore();
    const a = new RunSignals(storeA, new RedisSignalTransport({ url: redisUrl!, namespace }));
    const b = new RunSignals(storeB, new RedisSignalTransport({ url: redisUrl!, namespace }));
    await Promise.all([a.start(), b.start()]);
    try {
      const gotA: [string, number][] = [];
      const gotB: [string, number][] = [];
      a.subscribe((r, q) => gotA.push([r, q]));
      b.subscribe((r, q) => gotB.push([r, q]));
      await storeB.createRun({
        runId: "r",
        workspaceId: "w",
        traceId: "t",
        plan: { steps: [] } as never,
        context: {},
        memory: {},
      });
      await storeB.append("r", [{ type: "planning_started", at: new Date().toISOString(), data: {}, key: "1" }]);
      await waitFor(() => gotA.length === 1, { timeoutMs: 15_000, what: "process A signalled" });
      expect(gotA).toEqual([["r", 1]]);
      // a later change from A reaches B over the same channel, after any echo of B's own publish
      // (Redis delivers in publish order), so once B has the marker, B's account is complete
      await storeA.createRun({
        runId: "marker",
        workspaceId: "w",
        traceId: "t",
        plan: { steps: [] } as never,
        context: {},
        memory: {},
      });
      await storeA.append("marker", [{ type: "planning_started", at: new Date().toISOString(), data: {}, key: "1" }]);
      await waitFor(() => gotB.some(([r]) => r === "marker"), { timeoutMs: 15_000, what: "process B signalled by A" });
      expect(gotB).toEqual([
        ["r", 1],
        ["marker", 1],
      ]); // its own change once (locally), then A's
    } finally {
      await a.close();
      await b.close();
    }
  });

  test("a change committed right after start() reaches the others even when the publisher connects slowly", async () => {
    // a proxy in front of Redis holds back the first connection it accepts (the publisher's,
    // opened before the subscriber's) for 400 ms: start() must not return before it is ready
    const target = new URL(redisUrl!);
    let accepted = 0;
    const proxy: Server = createServer((client) => {
      const hold = accepted++ === 0 ? 400 : 0;
      setTimeout(() => {
        const upstream = createConnection(Number(target.port || 6379), target.hostname);
        client.pipe(upstream).pipe(client);
        const end = () => (client.destroy(), upstream.destroy());
        client.on("error", end).on("close", end);
        upstream.on("error", end).on("close", end);
      }, hold);
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    const port = (proxy.address() as { port: number }).port;
    const namespace = freshSchema("redis-slow");
    const store = new MemoryRunStore();
    const listener = new RunSignals(new MemoryRunStore(), new RedisSignalTransport({ url: redisUrl!, namespace }));
    await listener.start();
    const slow = new RunSignals(store, new RedisSignalTransport({ url: `redis://127.0.0.1:${port}`, namespace }));
    try {
      const got: string[] = [];
      listener.subscribe((r) => got.push(r));
      await slow.start();
      await store.createRun({
        runId: "early",
        workspaceId: "w",
        traceId: "t",
        plan: { steps: [] } as never,
        context: {},
        memory: {},
      });
      await store.append("early", [{ type: "planning_started", at: new Date().toISOString(), data: {}, key: "1" }]);
      await waitFor(() => got.length === 1, { timeoutMs: 5_000, what: "the listener signalled" });
      expect(got).toEqual(["early"]);
    } finally {
      await slow.close();
      await listener.close();
      await new Promise((r) => proxy.close(r));
    }
  });
});
