/**
 * Approvers are people, over REST with real HTTP and Postgres: personal keys name who started a
 * run, who decided and who cancelled (stored with the decision, in the events, in the run view);
 * roles per workspace are enforced (a viewer reads, but cannot start, decide or cancel); a key
 * without roles keeps every power.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { RunViewSchema } from "../src/api/schemas.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { approvalSkill, EffectLedger } from "./helpers/skills.js";
import type { KeyUser } from "../src/store/access-store.js";

const plan = (title: string) => ({ steps: [{ stepId: "pub", skillName: "test.publish", arguments: { title } }] });
const WS = "ws-people";

describe(`principals and roles over REST on ${postgresBackend.name}`, () => {
  let api: ApiUnderTest;
  let close: () => Promise<void>;
  const keys: Record<string, string> = {};
  const ledger = new EffectLedger();

  beforeAll(async () => {
    const o = await postgresBackend.open({ skills: [approvalSkill(ledger)] });
    api = await serveApi(o.runtime, o.db);
    await api.access.ensureWorkspace(WS);
    const personal = async (name: string, user: KeyUser) =>
      (keys[name] = (await api.access.createKey(WS, { user })).key);
    await personal("ada", { id: "ada", name: "Ada Lovelace", roles: ["operator"] });
    await personal("grace", { id: "grace", name: "Grace Hopper", roles: ["approver"] });
    await personal("vic", { id: "vic", roles: ["viewer"] });
    keys.service = (await api.access.createKey(WS, { label: "ci" })).key;
    close = async () => {
      await api.close();
      await o.close();
    };
  });
  afterAll(() => close?.());
  const as = (who: string, method: "GET" | "POST", path: string, body?: unknown) =>
    call(api.url, method, path, { key: keys[who], body });

  test("the run records who asked, the decision who approved, both in the view and the events", async () => {
    const started = await as("ada", "POST", "/api/tool-chains/run", { plan: plan("people") });
    expect(started.status).toBe(200);
    expect(started.body).toMatchObject({
      status: "waiting_confirmation",
      requestedBy: { kind: "user", id: "ada", name: "Ada Lovelace", via: "rest" },
    });
    const runId = started.body.runId as string;
    // an operator may not decide
    const refused = await as("ada", "POST", `/api/tool-chains/runs/${runId}/confirm`, {
      stepId: "pub",
      decision: "approve",
    });
    expect([refused.status, refused.body.error.code]).toEqual([403, "ROLE_NOT_ALLOWED"]);
    expect(refused.body.error.message).toContain("operator");

    const approved = await call(api.url, "POST", `/api/tool-chains/runs/${runId}/confirm`, {
      key: keys.grace,
      body: { stepId: "pub", decision: "approve", comment: "fine" },
      headers: { "x-toolchain-client": "console" },
    });
    expect(approved.status).toBe(200);
    const view = RunViewSchema.parse(approved.body);
    expect(view.status).toBe("completed");
    expect(view.steps[0]!.decision).toMatchObject({
      decision: "approve",
      by: { kind: "user", id: "grace", name: "Grace Hopper" },
      via: "console",
      comment: "fine",
    });

    // the stored view (GET) says the same, and so does the audit trail
    const read = await as("vic", "GET", `/api/tool-chains/runs/${runId}`);
    expect(read.status).toBe(200);
    expect(read.body.requestedBy).toMatchObject({ id: "ada", via: "rest" });
    expect(read.body.steps[0].decision).toMatchObject({ by: { id: "grace" }, via: "console" });
    const events = (await as("vic", "GET", `/api/tool-chains/runs/${runId}/events`)).body.events as {
      type: string;
      data: Record<string, unknown>;
    }[];
    expect(events.find((e) => e.type === "step_confirmed")!.data).toMatchObject({
      decision: "approve",
      by: { kind: "user", id: "grace" },
      via: "console",
    });

    // the decision row itself carries the principal (it survives checkpoint pruning)
    expect(await api.runtime.store.getDecision(runId, "pub", 0)).toMatchObject({
      decision: "approve",
      by: { id: "grace" },
      via: "console",
    });
  });

  test("a viewer reads but cannot start, decide or cancel: 403 ROLE_NOT_ALLOWED, nothing changes", async () => {
    const start = await as("vic", "POST", "/api/tool-chains/run", { plan: plan("viewer") });
    expect([start.status, start.body.error.code]).toEqual([403, "ROLE_NOT_ALLOWED"]);
    const planned = await as("vic", "POST", "/api/tool-chains/plan", { request: "publish something" });
    expect([planned.status, planned.body.error.code]).toEqual([403, "ROLE_NOT_ALLOWED"]);

    const runId = (await as("ada", "POST", "/api/tool-chains/run", { plan: plan("viewer-target") })).body
      .runId as string;
    const decide = await as("vic", "POST", `/api/tool-chains/runs/${runId}/confirm`, {
      stepId: "pub",
      decision: "approve",
    });
    expect([decide.status, decide.body.error.code]).toEqual([403, "ROLE_NOT_ALLOWED"]);
    const cancel = await as("vic", "POST", `/api/tool-chains/runs/${runId}/cancel`, {});
    expect([cancel.status, cancel.body.error.code]).toEqual([403, "ROLE_NOT_ALLOWED"]);
    // an approver cannot cancel either (operators and admins can)
    const approverCancel = await as("grace", "POST", `/api/tool-chains/runs/${runId}/cancel`, {});
    expect([approverCancel.status, approverCancel.body.error.code]).toEqual([403, "ROLE_NOT_ALLOWED"]);
    const still = await as("vic", "GET", `/api/tool-chains/runs/${runId}`);
    expect(still.body).toMatchObject({ status: "waiting_confirmation", pendingConfirmations: [{ stepId: "pub" }] });
    expect(await api.runtime.store.getDecision(runId, "pub", 0)).toBeUndefined();
  });

  test("a cancel records who asked: on the run and as a run_cancel_requested event", async () => {
    const runId = (await as("ada", "POST", "/api/tool-chains/run", { plan: plan("cancelled") })).body.runId as string;
    const r = await as("ada", "POST", `/api/tool-chains/runs/${runId}/cancel`, { reason: "wrong title" });
    expect(r.status).toBe(200);
    expect(r.body.status).toBe("cancelled");
    const row = await api.runtime.store.getRow(runId);
    expect(row!.cancelRequest).toMatchObject({ reason: "wrong title", by: { kind: "user", id: "ada" }, via: "rest" });
    const events = (await as("ada", "GET", `/api/tool-chains/runs/${runId}/events`)).body.events as {
      type: string;
      data: Record<string, unknown>;
    }[];
    expect(events.filter((e) => e.type === "run_cancel_requested").map((e) => e.data)).toEqual([
      { reason: "wrong title", by: { kind: "user", id: "ada", name: "Ada Lovelace" }, via: "rest" },
    ]);
    // the run's final event and its error name who cancelled it too
    expect(events.find((e) => e.type === "run_failed")!.data).toMatchObject({
      status: "cancelled",
      by: { kind: "user", id: "ada" },
      via: "rest",
    });
    expect(r.body.error).toMatchObject({ code: "CANCELLED", details: { by: { id: "ada" }, via: "rest" } });
  });

  test("a key without a user or roles keeps every power and is recorded as a service", async () => {
    const started = await as("service", "POST", "/api/tool-chains/run", { plan: plan("service") });
    expect(started.body.requestedBy).toMatchObject({ kind: "service", via: "rest" });
    const keyId = started.body.requestedBy.id as string;
    expect(keyId).toMatch(/^key_/);
    const done = await as("service", "POST", `/api/tool-chains/runs/${started.body.runId}/confirm`, {
      stepId: "pub",
      decision: "reject",
    });
    expect(done.status).toBe(200);
    expect(done.body.steps[0].decision).toMatchObject({
      decision: "reject",
      by: { kind: "service", id: keyId },
      via: "rest",
    });
  });

  test("personal keys are checked when created: a bad role or user id names the field", async () => {
    await expect(api.access.createKey(WS, { user: { id: "x", roles: ["root" as never] } })).rejects.toThrow(
      /user\.roles/,
    );
    await expect(api.access.createKey(WS, { user: { id: "has space" } })).rejects.toThrow(/user\.id/);
    const listed = await api.access.listKeys(WS);
    expect(
      listed
        .filter((k) => k.userId)
        .map((k) => k.userId)
        .sort(),
    ).toEqual(["ada", "grace", "vic"]);
  });
});
