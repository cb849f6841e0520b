/**
 * Live progress over SSE, through real HTTP on a real port and real Postgres: a whole run on
 * POST /stream, following a run live, disconnect + resume with Last-Event-ID (no gaps, no
 * duplicates), fan-out, and events executed by another runtime reaching a follower.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { RunEventSchema } from "../src/api/schemas.js";
import { PgSignalTransport } from "../src/live/pg-signals.js";
import { RunSignals } from "../src/live/signals.js";
import { openDatabase } from "../src/store/db.js";
import { PgRunStore } from "../src/store/pg-run-store.js";
import { freshSchema, postgresBackend, serverUrl } from "./helpers/backends.js";
import { call, collectSse, newKey, serveApi, sse, type ApiUnderTest, type SseMessage } from "./helpers/api.js";
import { Gates, gateSkill } from "./helpers/skills.js";
import { waitFor } from "./helpers/wait.js";

const seqs = (ms: SseMessage[]) => ms.map((m) => Number(m.id));
const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

describe(`SSE on ${postgresBackend.name}`, () => {
  let api: ApiUnderTest;
  let key: string;
  let close: () => Promise<void>;
  const gates = new Gates();

  beforeAll(async () => {
    const o = await postgresBackend.open({ skills: [gateSkill(gates, new Map())] });
    api = await serveApi(o.runtime, o.db);
    key = await newKey(api.access, "ws-sse");
    close = async () => {
      for (const g of ["s1", "s2", "s3", "f1"]) gates.open(g);
      await api.close();
      await o.close();
    };
  });
  afterAll(() => close?.());

  test("POST /stream: every lifecycle event of the run, in order, then the stream ends", async () => {
    const plan = {
      steps: [
        { stepId: "a", skillName: "core.wait", arguments: { ms: 5, value: 1 } },
        {
          stepId: "b",
          skillName: "core.fail",
          dependsOn: ["a"],
          arguments: { untilAttempt: 2, value: 2 },
          retry: { maxAttempts: 2, backoff: { kind: "fixed", initialMs: 1 } },
        },
        { stepId: "c", skillName: "core.pass", dependsOn: ["a"], arguments: { value: 3 } },
      ],
    };
    let status = 0;
    let type = "";
    const ms = await collectSse(`${api.url}/api/tool-chains/stream`, {
      key,
      method: "POST",
      body: { plan },
      onOpen: (r) => ((status = r.status), (type = r.headers.get("content-type") ?? "")),
    });
    expect([status, type]).toEqual([200, "text/event-stream; charset=utf-8"]);
    expect(seqs(ms)).toEqual(range(1, ms.length));
    for (const m of ms) {
      const e = RunEventSchema.parse(m.data);
      expect(m.event).toBe(e.type);
      expect(String(e.seq)).toBe(m.id);
      expect(Object.keys(m.data)).toEqual(
        e.stepId ? ["runId", "seq", "type", "stepId", "at", "data"] : ["runId", "seq", "type", "at", "data"],
      );
    }
    expect(ms[0]!.event).toBe("planning_started");
    expect(ms.at(-1)!.event).toBe("run_completed");
    expect(ms.filter((m) => m.event === "step_retrying").map((m) => m.data.stepId)).toEqual(["b"]);
    // the stream is the stored log
    const stored = (await call(api.url, "GET", `/api/tool-chains/runs/${ms[0]!.data.runId}/events`, { key })).body
      .events;
    expect(stored).toEqual(ms.map((m) => m.data));
  });

  test("POST /stream: an invalid plan answers 400 JSON, not a stream", async () => {
    const r = await call(api.url, "POST", "/api/tool-chains/stream", {
      key,
      body: { plan: { steps: [{ stepId: "a", skillName: "core.pass", dependsOn: ["a"] }] } },
      headers: { accept: "text/event-stream" },
    });
    expect([r.status, r.headers.get("content-type"), r.body.error.code]).toEqual([
      400,
      "application/json; charset=utf-8",
      "SELF_DEPENDENCY",
    ]);
  });

  test("a follower that disconnects and resumes with Last-Event-ID misses nothing and sees nothing twice", async () => {
    const plan = {
      steps: [
        { stepId: "s1", skillName: "test.gate", arguments: { gate: "s1" } },
        { stepId: "s2", skillName: "test.gate", dependsOn: ["s1"], arguments: { gate: "s2" } },
        { stepId: "s3", skillName: "test.gate", dependsOn: ["s2"], arguments: { gate: "s3" } },
      ],
    };
    const { runId } = (await call(api.url, "POST", "/api/tool-chains/run", { key, body: { plan, wait: false } })).body;
    const url = `${api.url}/api/tool-chains/runs/${runId}/events`;
    // first connection: read until s1 completed, then drop the connection
    const first: SseMessage[] = [];
    const ac = new AbortController();
    const reading = (async () => {
      for await (const m of sse(url, { key, signal: ac.signal })) {
        first.push(m);
        if (m.event === "step_started" && m.data.stepId === "s1") gates.open("s1");
        if (m.event === "step_completed" && m.data.stepId === "s1") {
          ac.abort();
          break;
        }
      }
    })();
    await reading;
    expect(first.at(-1), JSON.stringify(first)).toMatchObject({ event: "step_completed", data: { stepId: "s1" } });
    // while nobody listens, the run moves on
    await gates.untilEntered("s2");
    gates.open("s2");
    await waitFor(
      async () =>
        (await call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key })).body.steps[2].status === "running",
      { what: "s3 running" },
    );
    // reconnect as EventSource would: Last-Event-ID = the last id seen
    const second: SseMessage[] = [];
    for await (const m of sse(url, { key, headers: { "last-event-id": first.at(-1)!.id! } })) {
      second.push(m);
      if (m.event === "step_started" && m.data.stepId === "s3") gates.open("s3");
    }
    const all = [...first, ...second];
    expect(seqs(all)).toEqual(range(1, all.length));
    expect(all.at(-1)!.event).toBe("run_completed");
    expect(all.filter((m) => m.event === "step_completed").map((m) => m.data.stepId)).toEqual(["s1", "s2", "s3"]);
    // a client that has everything is told not to reconnect
    let status = 0;
    expect(
      await collectSse(url, { key, headers: { "last-event-id": all.at(-1)!.id! }, onOpen: (r) => (status = r.status) }),
    ).toEqual([]);
    expect(status).toBe(204);
    // ?after= works for SSE too (replay of a finished run, then the end)
    expect(seqs(await collectSse(`${url}?after=3`, { key }))).toEqual(range(4, all.length));
    const bad = await call(api.url, "GET", `/api/tool-chains/runs/${runId}/events`, {
      key,
      headers: { accept: "text/event-stream", "last-event-id": "x" },
    });
    expect([bad.status, bad.body.error.code]).toEqual([400, "INVALID_QUERY"]);
  });

  test("fan-out: many followers of one run receive the same complete sequence (one store reader per run)", async () => {
    const { runId } = (
      await call(api.url, "POST", "/api/tool-chains/run", {
        key,
        body: {
          plan: {
            steps: [
              { stepId: "f1", skillName: "test.gate", arguments: { gate: "f1" } },
              { stepId: "f2", skillName: "core.pass", dependsOn: ["f1"], arguments: { value: 1 } },
            ],
          },
          wait: false,
        },
      })
    ).body;
    const url = `${api.url}/api/tool-chains/runs/${runId}/events`;
    const got: SseMessage[][] = Array.from({ length: 25 }, () => []);
    const clients = got.map(async (into) => {
      for await (const m of sse(url, { key })) into.push(m);
    });
    // every client has caught up (it saw f1 start) and now follows live
    await waitFor(() => got.every((g) => g.some((m) => m.event === "step_started" && m.data.stepId === "f1")), {
      what: "25 clients caught up",
      timeoutMs: 30_000,
    });
    expect(api.live.feeds.size).toBe(1);
    // from here on, count the store reads for this run: one feed reads once per change for all 25
    // clients (a reader per client would make at least 25 reads for the first change alone)
    const store = api.runtime.store;
    const list = store.list.bind(store);
    let reads = 0;
    store.list = (id, after) => {
      if (id === runId) reads++;
      return list(id, after);
    };
    try {
      gates.open("f1");
      await Promise.all(clients);
    } finally {
      store.list = list;
    }
    const expected = seqs(got[0]!);
    expect(expected).toEqual(range(1, expected.length));
    expect(got[0]!.at(-1)!.event).toBe("run_completed");
    for (const r of got) expect(seqs(r)).toEqual(expected);
    const liveEvents =
      expected.length - got[0]!.findIndex((m) => m.event === "step_started" && m.data.stepId === "f1") - 1;
    expect(reads).toBeGreaterThan(0);
    expect(reads).toBeLessThanOrEqual(liveEvents + 2); // at most one per event (+ the poll safety net)
    await waitFor(() => api.live.feeds.size === 0, { what: "the feed closed" });
  });
});

describe(`events executed by another runtime reach followers (${postgresBackend.name})`, () => {
  test("an SSE follower on app A sees the run that runtime B executes", async () => {
    const gates = new Gates();
    const pair = await postgresBackend.openPair({ skills: [gateSkill(gates, new Map())] });
    const a = await serveApi(pair.a, pair.db);
    const b = await serveApi(pair.b, pair.db, { access: a.access });
    try {
      const key = await newKey(a.access, "ws-pair");
      const { runId } = (
        await call(b.url, "POST", "/api/tool-chains/run", {
          key,
          body: {
            plan: {
              steps: [
                { stepId: "x", skillName: "test.gate", arguments: { gate: "x" } },
                { stepId: "y", skillName: "core.pass", dependsOn: ["x"], arguments: { value: 1 } },
              ],
            },
            wait: false,
          },
        })
      ).body;
      expect(pair.b.activeRuns()).toContain(runId);
      const following = collectSse(`${a.url}/api/tool-chains/runs/${runId}/events`, { key });
      await waitFor(() => a.live.feeds.size > 0, { what: "a feed on app A" });
      gates.open("x");
      const ms = await following;
      expect(seqs(ms)).toEqual(range(1, ms.length));
      expect(ms.at(-1)!.event).toBe("run_completed");
      expect(pair.a.activeRuns()).not.toContain(runId);
    } finally {
      gates.open("x");
      await a.close();
      await b.close();
      await pair.close();
    }
  });

  test.runIf(serverUrl)(
    "Postgres LISTEN/NOTIFY: an append through another connection pool signals this process",
    async () => {
      const schema = freshSchema();
      const other = await openDatabase({ url: serverUrl, schema, poolSize: 1 });
      const o = await postgresBackend.open();
      try {
        // the other "process": its own pool on the same schema (no in-process watcher shared)
        const { migrate } = await import("../src/store/migrations.js");
        await migrate(other);
        const writer = new PgRunStore(other);
        const reader = new PgRunStore({ ...other, pool: o.db!.pool, close: async () => undefined });
        const signals = new RunSignals(reader, new PgSignalTransport(serverUrl!, schema));
        await signals.start();
        const got: [string, number][] = [];
        signals.subscribe((r, q) => got.push([r, q]));
        await writer.createRun({
          runId: "r1",
          workspaceId: "w",
          traceId: "t",
          plan: {
            steps: [{ stepId: "a", skillName: "core.pass", dependsOn: [], arguments: {} }],
            onFailure: "skip_dependents",
            rollbackMode: "best_effort",
          } as never,
          context: {},
          memory: {},
        });
        await writer.append("r1", [
          { type: "planning_started", at: new Date().toISOString(), data: {}, key: "k1" },
          { type: "planning_completed", at: new Date().toISOString(), data: {}, key: "k2" },
        ]);
        await waitFor(() => got.length > 0, { timeoutMs: 5_000, what: "an event" });
        expect(got).toEqual([["r1", 2]]);
        await signals.close();
      } finally {
        await other.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
        await other.close();
        await o.close();
      }
    },
  );
});
