/**
 * Human confirmation through the API (real HTTP, real Postgres): approve and reject followed by
 * the run finishing, refused decisions, racing duplicates (one resume: effects counted), and a
 * confirmation served by another app and runtime than the one that started the run.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { RunViewSchema } from "../src/api/schemas.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, collectSse, newKey, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { approvalSkill, EffectLedger } from "./helpers/skills.js";
import { waitFor } from "./helpers/wait.js";

const publishPlan = (title: string) => ({
  steps: [
    { stepId: "prep", skillName: "core.pass", arguments: { value: title } },
    { stepId: "pub", skillName: "test.publish", dependsOn: ["prep"], arguments: { title: { $ref: "steps.prep" } } },
    {
      stepId: "after",
      skillName: "core.pass",
      dependsOn: ["pub"],
      arguments: { value: { $ref: "steps.pub.published" } },
    },
  ],
});

describe(`confirmation through the API on ${postgresBackend.name}`, () => {
  let api: ApiUnderTest;
  let key: string;
  let close: () => Promise<void>;
  let ledger: EffectLedger;

  beforeAll(async () => {
    ledger = new EffectLedger();
    const o = await postgresBackend.open({ skills: [approvalSkill(ledger)] });
    api = await serveApi(o.runtime, o.db);
    key = await newKey(api.access, "ws-c");
    close = async () => {
      await api.close();
      await o.close();
    };
  });
  afterAll(() => close?.());
  const post = (path: string, body?: unknown) => call(api.url, "POST", path, { key, body });
  const waiting = async (title: string) => {
    const r = await post("/api/tool-chains/run", { plan: publishPlan(title) });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      status: "waiting_confirmation",
      pendingConfirmations: [
        { stepId: "pub", skillName: "test.publish", arguments: { title }, preview: { willPublish: title } },
      ],
    });
    return r.body.runId as string;
  };

  test("approve: the run resumes and finishes; the answer is the final view", async () => {
    const runId = await waiting("approved");
    const r = await post(`/api/tool-chains/runs/${runId}/confirm`, {
      stepId: "pub",
      decision: "approve",
      comment: "ok",
    });
    expect(r.status).toBe(200);
    expect(RunViewSchema.parse(r.body)).toMatchObject({
      runId,
      status: "completed",
      pendingConfirmations: [],
      result: { outputs: { after: "approved" } },
    });
    expect(ledger.log).toContain("publish:approved");
    const events = (await call(api.url, "GET", `/api/tool-chains/runs/${runId}/events`, { key })).body.events;
    expect(events.map((e: { type: string }) => e.type).slice(-6)).toEqual([
      "step_confirmed",
      "step_started",
      "step_completed",
      "step_started",
      "step_completed",
      "run_completed",
    ]);
    expect(events.find((e: { type: string }) => e.type === "step_confirmed").data).toMatchObject({
      decision: "approve",
      comment: "ok",
    });
  });

  test("approve with edited arguments; invalid edits answer 400 INVALID_ARGUMENTS and change nothing", async () => {
    const runId = await waiting("draft");
    const bad = await post(`/api/tool-chains/runs/${runId}/confirm`, {
      stepId: "pub",
      decision: "approve",
      arguments: { title: "" },
    });
    expect([bad.status, bad.body.error.code]).toEqual([400, "INVALID_ARGUMENTS"]);
    expect((await call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key })).body.status).toBe(
      "waiting_confirmation",
    );
    const ok = await post(`/api/tool-chains/runs/${runId}/confirm`, {
      stepId: "pub",
      decision: "approve",
      arguments: { title: "final" },
    });
    expect(ok.body.steps.find((s: { stepId: string }) => s.stepId === "pub")).toMatchObject({
      status: "completed",
      input: { title: "final" },
      output: { published: "final" },
    });
  });

  test("reject: the step fails with REJECTED, its dependents are skipped, the run ends failed", async () => {
    const runId = await waiting("rejected");
    const r = await post(`/api/tool-chains/runs/${runId}/confirm`, {
      stepId: "pub",
      decision: "reject",
      comment: "not now",
    });
    expect(r.status).toBe(200);
    expect(r.body.status).toBe("failed");
    expect(r.body.steps.map((s: { stepId: string; status: string }) => [s.stepId, s.status])).toEqual([
      ["prep", "completed"],
      ["pub", "failed"],
      ["after", "skipped"],
    ]);
    expect(r.body.steps[1].error).toMatchObject({ code: "REJECTED", message: "rejected: not now" });
    expect(ledger.log).not.toContain("publish:rejected");
  });

  test("refused decisions: 409 CONFIRMATION_NOT_PENDING, 400 INVALID_BODY / INVALID_DECISION, 404", async () => {
    const runId = await waiting("refusals");
    const expectErr = async (body: unknown, status: number, code: string, id = runId) => {
      const r = await post(`/api/tool-chains/runs/${id}/confirm`, body);
      expect([r.status, r.body.error.code], JSON.stringify(body)).toEqual([status, code]);
      return r.body.error;
    };
    expect(await expectErr({ stepId: "prep", decision: "approve" }, 409, "CONFIRMATION_NOT_PENDING")).toMatchObject({
      message: `step "prep" of run ${runId} is not waiting for confirmation`,
    });
    await expectErr({ stepId: "nope", decision: "approve" }, 409, "CONFIRMATION_NOT_PENDING");
    await expectErr({ stepId: "pub", decision: "maybe" }, 400, "INVALID_BODY");
    await expectErr({ stepId: "pub" }, 400, "INVALID_BODY");
    await expectErr({ stepId: "pub", decision: "approve", extra: 1 }, 400, "INVALID_BODY");
    await expectErr({ stepId: "pub", decision: "mark_done" }, 400, "INVALID_DECISION");
    await expectErr({ stepId: "pub", decision: "approve" }, 404, "RUN_NOT_FOUND", "no-such-run");
    await post(`/api/tool-chains/runs/${runId}/confirm`, { stepId: "pub", decision: "approve" });
    // the same decision again answers with the current state; a different one is refused
    const again = await post(`/api/tool-chains/runs/${runId}/confirm`, { stepId: "pub", decision: "approve" });
    expect([again.status, again.body.status]).toEqual([200, "completed"]);
    await expectErr({ stepId: "pub", decision: "reject" }, 409, "CONFIRMATION_NOT_PENDING");
  });

  test("concurrent duplicate confirms resume the run once", async () => {
    const runId = await waiting("racing");
    const before = ledger.total();
    const replies = await Promise.all(
      Array.from({ length: 8 }, () =>
        post(`/api/tool-chains/runs/${runId}/confirm`, { stepId: "pub", decision: "approve" }),
      ),
    );
    expect(replies.map((r) => [r.status, r.body.status])).toEqual(replies.map(() => [200, "completed"]));
    expect(ledger.total() - before).toBe(1);
    expect(ledger.log.filter((l) => l === "publish:racing")).toHaveLength(1);
    const events = (await call(api.url, "GET", `/api/tool-chains/runs/${runId}/events`, { key })).body.events as {
      type: string;
      seq: number;
    }[];
    expect(events.filter((e) => e.type === "step_confirmed")).toHaveLength(1);
    expect(events.filter((e) => e.type === "run_completed")).toHaveLength(1);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  });

  test("wait: false answers 202 at once; the run finishes behind it", async () => {
    const runId = await waiting("later");
    const r = await post(`/api/tool-chains/runs/${runId}/confirm`, { stepId: "pub", decision: "approve", wait: false });
    expect(r.status).toBe(202);
    expect(r.headers.get("location")).toBe(`/api/tool-chains/runs/${runId}`);
    await waitFor(
      async () => (await call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key })).body.status === "completed",
      { what: "run completed" },
    );
  });
});

describe(`a confirmation served by another app and runtime (${postgresBackend.name})`, () => {
  test("app A starts the run; app B (another runtime on the same storage) takes the decision and finishes it; A's followers see it", async () => {
    const ledger = new EffectLedger();
    const pair = await postgresBackend.openPair({ skills: [approvalSkill(ledger)] });
    const a = await serveApi(pair.a, pair.db);
    const b = await serveApi(pair.b, pair.db, { access: a.access });
    try {
      const key = await newKey(a.access, "ws-two");
      const started = await call(a.url, "POST", "/api/tool-chains/run", { key, body: { plan: publishPlan("remote") } });
      expect(started.body.status).toBe("waiting_confirmation");
      const runId = started.body.runId as string;
      const lastSeq = (await call(a.url, "GET", `/api/tool-chains/runs/${runId}/events`, { key })).body.events
        .length as number;
      // a live follower on A, from where the run stopped
      const following = collectSse(`${a.url}/api/tool-chains/runs/${runId}/events?after=${lastSeq}`, { key });
      await waitFor(() => a.live.feeds.size > 0, { what: "a feed on app A" });
      const done = await call(b.url, "POST", `/api/tool-chains/runs/${runId}/confirm`, {
        key,
        body: { stepId: "pub", decision: "approve" },
      });
      expect([done.status, done.body.status]).toEqual([200, "completed"]);
      expect(ledger.total()).toBe(1);
      const live = await following;
      expect(live.map((m) => m.event)).toEqual([
        "step_confirmed",
        "step_started",
        "step_completed",
        "step_started",
        "step_completed",
        "run_completed",
      ]);
      expect(live.map((m) => Number(m.id))).toEqual(live.map((_, i) => lastSeq + 1 + i));
      const viaA = await call(a.url, "GET", `/api/tool-chains/runs/${runId}`, { key });
      expect(viaA.body).toMatchObject({ status: "completed", result: { outputs: { after: "remote" } } });
      // duplicates sent to both apps at once still resume nothing
      const dup = await Promise.all(
        [a, b].map((x) =>
          call(x.url, "POST", `/api/tool-chains/runs/${runId}/confirm`, {
            key,
            body: { stepId: "pub", decision: "approve" },
          }),
        ),
      );
      expect(dup.map((r) => r.body.status)).toEqual(["completed", "completed"]);
      expect(ledger.total()).toBe(1);
    } finally {
      await a.close();
      await b.close();
      await pair.close();
    }
  });
});
