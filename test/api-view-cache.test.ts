/**
 * The in-process run-view cache (no Redis): GET /runs/:id answers from the cache while the run's
 * version is unchanged, and never serves a view older than a change already committed, whether
 * this process made it or another process sharing the database did.
 * "Another process" is a second Runtime with its own store and checkpointer on the same database
 * (backends.openPair): it executes the run, the API process only reads. On server Postgres
 * (DATABASE_URL) the version is read from the database; embedded, from the in-process
 * generations every store on the database's pool shares (src/store/view-generations.ts).
 */
import { expect, test } from "vitest";
import { postgresBackend } from "./helpers/backends.js";
import { call, newKey, serveApi } from "./helpers/api.js";
import { approvalSkill, EffectLedger, gateSkill, Gates } from "./helpers/skills.js";
import { waitFor } from "./helpers/wait.js";
import type { Runtime } from "../src/runtime/runtime.js";

const chain = (gates: string[]) => ({
  steps: [
    ...gates.map((g, i) => ({
      stepId: g,
      skillName: "test.gate",
      dependsOn: i ? [gates[i - 1]!] : [],
      arguments: { gate: g },
    })),
    { stepId: "pub", skillName: "test.publish", dependsOn: [gates.at(-1)!], arguments: { title: "t" } },
  ],
});

/** The stored history (what any process can see) has this event. */
const stored = (rt: Runtime, runId: string, type: string, stepId?: string) =>
  waitFor(
    async () =>
      (await rt.store.list(runId)).some((e) => e.type === type && (stepId === undefined || e.stepId === stepId)),
    { what: `${type} ${stepId ?? ""} stored`, timeoutMs: 30_000 },
  );

test(`a cached view is never stale after a change by another process (${postgresBackend.name})`, async () => {
  const gates = new Gates();
  const skills = [gateSkill(gates, new Map()), approvalSkill(new EffectLedger())];
  const { a, b, db, close } = await postgresBackend.openPair({ skills });
  const api = await serveApi(a, db); // the API process: it never executes this run
  try {
    const key = await newKey(api.access, "ws-vc");
    const ids = ["g0", "g1", "g2"];
    // the run must belong to the key's workspace
    const h = b.run(chain(ids), { workspaceId: "ws-vc" });
    h.result.catch(() => undefined);
    const get = () => call(api.url, "GET", `/api/tool-chains/runs/${h.runId}`, { key });
    const statusOf = (body: { steps: { stepId: string; status: string }[] }, id: string) =>
      body.steps.find((s) => s.stepId === id)!.status;

    await gates.untilEntered("g0");
    await stored(a, h.runId, "step_started", "g0");
    const first = await get();
    expect(first.status).toBe(200);
    expect(statusOf(first.body, "g0")).toBe("running");
    // unchanged: served from the cache, byte for byte
    const again = await get();
    expect([again.headers.get("x-cache"), again.body]).toEqual(["hit", first.body]);

    for (const [i, g] of ids.entries()) {
      gates.open(g);
      await stored(a, h.runId, "step_completed", g);
      const after = await get();
      expect(after.headers.get("x-cache"), `first GET after ${g} completed`).toBe("miss");
      expect(statusOf(after.body, g)).toBe("completed");
      if (i + 1 < ids.length) {
        await gates.untilEntered(ids[i + 1]!);
        await stored(a, h.runId, "step_started", ids[i + 1]);
        expect(statusOf((await get()).body, ids[i + 1]!)).toBe("running");
      }
    }

    // B's drive parks the run at the confirmation and lets go of it
    expect((await h.result).status).toBe("waiting_confirmation");
    const waiting = await get();
    expect([waiting.body.status, waiting.body.pendingConfirmations.map((p: { stepId: string }) => p.stepId)]).toEqual([
      "waiting_confirmation",
      ["pub"],
    ]);
    const cached = await get();
    expect([cached.headers.get("x-cache"), cached.body]).toEqual(["hit", waiting.body]);

    // another process answers the confirmation: the next GET shows the finished run
    const done = await (await b.confirm(h.runId, { stepId: "pub", decision: "approve" })).result;
    expect(done.status).toBe("completed");
    const final = await get();
    expect([final.body.status, statusOf(final.body, "pub")]).toEqual(["completed", "completed"]);
  } finally {
    for (const g of ["g0", "g1", "g2"]) gates.open(g);
    await api.close();
    await close();
  }
}, 120_000);

test(`a run executed by the API's own process: every step change misses the cache (${postgresBackend.name})`, async () => {
  const gates = new Gates();
  const o = await postgresBackend.open({ skills: [gateSkill(gates, new Map()), approvalSkill(new EffectLedger())] });
  const api = await serveApi(o.runtime, o.db);
  try {
    const key = await newKey(api.access, "ws-local");
    const started = await call(api.url, "POST", "/api/tool-chains/run", {
      key,
      body: { plan: chain(["h0", "h1"]), wait: false },
    });
    expect(started.status).toBe(202);
    const runId: string = started.body.runId;
    const get = () => call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key });
    const statusOf = (body: { steps: { stepId: string; status: string }[] }, id: string) =>
      body.steps.find((s) => s.stepId === id)!.status;
    await gates.untilEntered("h0");
    await waitFor(async () => statusOf((await get()).body, "h0") === "running", { what: "h0 running" });
    // the GET that first showed h0 running may have read the version just before h0's start was
    // applied, and the start event may land after the live status moved (a version is read before
    // its view is computed: such an entry is never served again); once nothing moves, GETs hit
    await waitFor(async () => (await get()).headers.get("x-cache") === "hit", {
      what: "a repeated GET of the running run served from the cache",
    });
    gates.open("h0");
    await gates.untilEntered("h1");
    // the live projection of this process moved: the cached view is not served
    await waitFor(
      () =>
        o.runtime.activeRuns().includes(runId) &&
        o.runtime.getRun(runId).then((v) => v.steps.find((s) => s.stepId === "h0")!.status === "completed"),
      { what: "h0 completed live" },
    );
    expect(statusOf((await get()).body, "h0")).toBe("completed");
    gates.open("h1");
    await waitFor(async () => (await get()).body.status === "waiting_confirmation", { what: "run waiting" });
    // the live view says waiting as soon as the wait event is applied, before the drive ends and
    // syncs the run: once it has, nothing moves and repeated GETs hit
    await waitFor(
      async () => !o.runtime.activeRuns().includes(runId) && (await get()).headers.get("x-cache") === "hit",
      { what: "the waiting run served from the cache" },
    );
    const w1 = await get();
    const w2 = await get();
    expect([w2.headers.get("x-cache"), w2.body]).toEqual(["hit", w1.body]);
    // another workspace never sees the cached body
    expect(
      (await call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key: await newKey(api.access, "ws-other") }))
        .status,
    ).toBe(404);
  } finally {
    gates.open("h0");
    gates.open("h1");
    await api.close();
    await o.close();
  }
}, 120_000);
