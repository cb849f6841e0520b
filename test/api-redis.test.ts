/**
 * With REDIS_URL: the run-view cache (hit, invalidated by every change, workspace-checked) and
 * Redis pub/sub carrying live hints between processes. Skipped without REDIS_URL (CI sets it on
 * the server pass).
 */
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
});
