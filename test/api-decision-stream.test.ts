/**
 * GET /api/tool-chains/decisions/events over real HTTP: one stream carries the decision and wait
 * events of every run of the caller's workspace (the inbox follows all its rows on it), not another
 * workspace's; with REDIS_URL, a decision taken through another process reaches it too.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { postgresBackend } from "./helpers/backends.js";
import { call, newKey, serveApi, sse, type ApiUnderTest, type SseMessage } from "./helpers/api.js";
import { approvalSkill, EffectLedger } from "./helpers/skills.js";

const plan = (title: string) => ({
  plan: { steps: [{ stepId: "pub", skillName: "test.publish", arguments: { title } }] },
});

/** Reads the stream into `got` until aborted. */
function listen(url: string, key: string, ac: AbortController, got: SseMessage[]): Promise<number> {
  let status = 0;
  return new Promise((resolve, reject) => {
    void (async () => {
      try {
        for await (const m of sse(`${url}/api/tool-chains/decisions/events`, {
          key,
          signal: ac.signal,
          onOpen: (r) => resolve((status = r.status)),
        }))
          got.push(m);
      } catch (e) {
        if (!status) reject(e);
      }
    })();
  });
}

const until = async (pred: () => boolean, ms: number) => {
  const end = Date.now() + ms;
  while (!pred() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  return pred();
};

describe(`the workspace's decision stream on ${postgresBackend.name}`, () => {
  let api: ApiUnderTest;
  let key: string;
  let other: string;
  let close: () => Promise<void>;
  let opened: Awaited<ReturnType<typeof postgresBackend.open>>;

  beforeAll(async () => {
    const o = (opened = await postgresBackend.open({ skills: [approvalSkill(new EffectLedger())] }));
    api = await serveApi(o.runtime, o.db);
    key = await newKey(api.access, "ws-ds");
    other = await newKey(api.access, "ws-ds-other");
    close = async () => {
      await api.close();
      await o.close();
    };
  });
  afterAll(() => close?.());

  test("a decision on run #5 of 6 reaches the stream at once, naming who decided; another workspace's does not", async () => {
    const runs: string[] = [];
    for (let i = 1; i <= 6; i++) {
      const r = await call(api.url, "POST", "/api/tool-chains/run", { key, body: plan(`t${i}`) });
      expect(r.body.status).toBe("waiting_confirmation");
      runs.push(r.body.runId);
    }
    const foreign = (await call(api.url, "POST", "/api/tool-chains/run", { key: other, body: plan("x") })).body.runId;
    // past the skew allowed for other processes' clocks: their waits began before the stream opened
    await new Promise((r) => setTimeout(r, 1_200));
    const ac = new AbortController();
    const got: SseMessage[] = [];
    try {
      expect(await listen(api.url, key, ac, got)).toBe(200);
      const foreignDecided = await call(api.url, "POST", `/api/tool-chains/runs/${foreign}/confirm`, {
        key: other,
        body: { stepId: "pub", decision: "reject", comment: "not yours" },
      });
      expect(foreignDecided.status).toBe(200);
      const t0 = Date.now();
      const r = await call(api.url, "POST", `/api/tool-chains/runs/${runs[4]}/confirm`, {
        key,
        body: { stepId: "pub", decision: "reject", comment: "no" },
      });
      expect(r.status).toBe(200);
      const confirmed = () => got.find((m) => m.event === "step_confirmed");
      expect(await until(() => !!confirmed(), 3_000)).toBe(true);
      expect(Date.now() - t0).toBeLessThan(1_500);
      expect(confirmed()!.data).toMatchObject({
        runId: runs[4],
        stepId: "pub",
        type: "step_confirmed",
        data: { decision: "reject", by: { kind: "service" } },
      });
      // only decision and wait events, only this workspace's runs, none from before the stream opened
      expect(got.every((m) => m.data.runId === runs[4])).toBe(true);
      expect(got.map((m) => m.event).filter((t) => !["step_confirmed", "step_started"].includes(t))).toEqual([]);
      // a new wait reaches it as well
      const late = (await call(api.url, "POST", "/api/tool-chains/run", { key, body: plan("late") })).body.runId;
      expect(
        await until(() => got.some((m) => m.data.runId === late && m.event === "step_waiting_confirmation"), 3_000),
      ).toBe(true);
    } finally {
      ac.abort();
    }
  });

  test("it is bounded like the run streams: it takes one of the key's stream slots and gives it back", async () => {
    const one = await serveApi(opened.runtime, opened.db, { access: api.access, limits: { streamsPerKey: 1 } });
    const ac = new AbortController();
    try {
      expect(await listen(one.url, key, ac, [])).toBe(200);
      const second = await call(one.url, "GET", "/api/tool-chains/decisions/events", {
        key,
        headers: { accept: "text/event-stream" },
      });
      expect([second.status, second.body.error.code]).toEqual([429, "TOO_MANY_STREAMS"]);
      ac.abort();
      // the slot comes back once the server has seen the client go
      let status = 0;
      for (const end = Date.now() + 3_000; status !== 200 && Date.now() < end;) {
        const again = new AbortController();
        status = await listen(one.url, key, again, []);
        again.abort();
        if (status !== 200) await new Promise((r) => setTimeout(r, 50));
      }
      expect(status).toBe(200);
    } finally {
      ac.abort();
      await one.close();
    }
  });

  test("it is a stream only: without Accept: text/event-stream, 400 naming the header", async () => {
    const r = await call(api.url, "GET", "/api/tool-chains/decisions/events", { key });
    expect([r.status, r.body.error.code]).toEqual([400, "INVALID_QUERY"]);
    expect(r.body.error.message).toMatch(/Accept/);
    expect((await call(api.url, "GET", "/api/tool-chains/decisions/events", {})).status).toBe(401);
  });
});

const redisUrl = process.env.REDIS_URL || undefined;

describe.runIf(redisUrl)(`the decision stream across processes over Redis (${postgresBackend.name})`, () => {
  test("a decision taken through another app reaches a stream opened on this one", async () => {
    const o = await postgresBackend.open({ skills: [approvalSkill(new EffectLedger())] });
    const a = await serveApi(o.runtime, o.db, { redisUrl });
    const b = await serveApi(o.runtime, o.db, { redisUrl, access: a.access });
    const ac = new AbortController();
    try {
      expect(a.live.transport).toBe("redis");
      const key = await newKey(a.access, "ws-ds-redis");
      const { runId } = (await call(b.url, "POST", "/api/tool-chains/run", { key, body: plan("r") })).body;
      const got: SseMessage[] = [];
      expect(await listen(a.url, key, ac, got)).toBe(200);
      await call(b.url, "POST", `/api/tool-chains/runs/${runId}/confirm`, {
        key,
        body: { stepId: "pub", decision: "approve" },
      });
      expect(await until(() => got.some((m) => m.event === "step_confirmed" && m.data.runId === runId), 3_000)).toBe(
        true,
      );
    } finally {
      ac.abort();
      await b.close();
      await a.close();
      await o.close();
    }
  });
});
