/**
 * The REST API through real HTTP on a real port, over real Postgres (embedded, or the server at
 * DATABASE_URL): every endpoint and error code.
 */
import { parse as parseOpenApi, validate as validateOpenApi } from "@readme/openapi-parser";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  EventsResponseSchema,
  HealthResponseSchema,
  RunListResponseSchema,
  RunViewSchema,
  SkillsResponseSchema,
  ErrorResponseSchema,
} from "../src/api/schemas.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, newKey, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { approvalSkill, EffectLedger, Gates, gateSkill } from "./helpers/skills.js";
import { waitFor } from "./helpers/wait.js";

const plan1 = {
  steps: [
    { stepId: "a", skillName: "core.pass", arguments: { value: { n: 1 } } },
    { stepId: "b", skillName: "core.pass", dependsOn: ["a"], arguments: { value: { $ref: "steps.a.n" } } },
  ],
};

describe(`REST API on ${postgresBackend.name}`, () => {
  let api: ApiUnderTest;
  let close: () => Promise<void>;
  let keyA: string;
  let keyB: string;
  const gates = new Gates();
  const ledger = new EffectLedger();
  const get = (path: string, key = keyA, headers?: Record<string, string>) =>
    call(api.url, "GET", path, { key, headers });
  const post = (path: string, body?: unknown, key = keyA) => call(api.url, "POST", path, { key, body });
  const runCount = async (key = keyA) => (await get("/api/tool-chains/runs?limit=100", key)).body.runs.length as number;

  beforeAll(async () => {
    const o = await postgresBackend.open({ skills: [approvalSkill(ledger), gateSkill(gates, new Map())] });
    api = await serveApi(o.runtime, o.db);
    close = async () => {
      for (const g of ["g1", "g2", "g3"]) gates.open(g);
      await api.close();
      await o.close();
    };
    keyA = await newKey(api.access, "ws-a");
    keyB = await newKey(api.access, "ws-b", ["core.pass"]);
  });
  afterAll(() => close?.());

  test("health, readiness and the OpenAPI document (valid OpenAPI 3.1)", async () => {
    expect(HealthResponseSchema.parse((await call(api.url, "GET", "/healthz")).body)).toEqual({ status: "ok" });
    expect((await call(api.url, "GET", "/readyz")).body).toEqual({ status: "ready" });
    const doc = (await call(api.url, "GET", "/openapi.json")).body;
    expect(doc.openapi).toBe("3.1.0");
    const result = await validateOpenApi(structuredClone(doc));
    expect(result.valid, JSON.stringify(result)).toBe(true);
    const parsed = (await parseOpenApi(structuredClone(doc))) as { paths: Record<string, unknown> };
    expect(Object.keys(parsed.paths)).toEqual(
      expect.arrayContaining([
        "/api/tool-chains/run",
        "/api/tool-chains/stream",
        "/api/tool-chains/runs",
        "/api/tool-chains/runs/{runId}",
        "/api/tool-chains/runs/{runId}/events",
        "/api/tool-chains/runs/{runId}/confirm",
        "/api/tool-chains/runs/{runId}/cancel",
        "/api/skills",
      ]),
    );
    // request bodies are the schemas the routes parse: the plan is the ToolChainPlan contract
    expect(doc.components.schemas.RunRequest.properties.plan.properties.steps.type).toBe("array");
    expect(doc.components.schemas.ConfirmRequest.properties.decision.enum).toEqual(
      expect.arrayContaining(["approve", "reject"]),
    );
  });

  test("every /api request needs a valid key: 401 UNAUTHORIZED", async () => {
    for (const r of [
      await call(api.url, "GET", "/api/skills"),
      await get("/api/skills", "tck_not-a-key"),
      await call(api.url, "GET", "/api/skills", { headers: { authorization: "Basic abc" } }),
    ]) {
      expect(r.status).toBe(401);
      expect(ErrorResponseSchema.parse(r.body).error.code).toBe("UNAUTHORIZED");
      expect(r.headers.get("www-authenticate")).toContain("Bearer");
    }
    const extra = (await api.access.createKey("ws-a")).key;
    expect((await get("/api/skills", extra)).status).toBe(200);
    const [info] = (await api.access.listKeys("ws-a"))
      .filter((k) => extra.startsWith(k.prefix) && !k.revokedAt)
      .slice(-1);
    expect(await api.access.revokeKey(info!.keyId)).toBe(true);
    expect((await get("/api/skills", extra)).body.error).toEqual({
      code: "UNAUTHORIZED",
      message: "unknown or revoked API key",
    });
  });

  test("POST /run waits for the run and answers with the run view (traceId from traceparent)", async () => {
    const r = await call(api.url, "POST", "/api/tool-chains/run", {
      key: keyA,
      body: { plan: plan1, context: { x: 1 } },
      headers: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" },
    });
    expect(r.status).toBe(200);
    const view = RunViewSchema.parse(r.body);
    expect(Object.keys(r.body).slice(0, 3)).toEqual(["runId", "status", "traceId"]);
    expect(view).toMatchObject({
      status: "completed",
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      context: { x: 1 },
      result: { outputs: { a: { n: 1 }, b: 1 } },
    });
    expect(view.steps.map((s) => [s.stepId, s.status, s.attempts, s.output])).toEqual([
      ["a", "completed", 1, { n: 1 }],
      ["b", "completed", 1, 1],
    ]);
    const again = await get(`/api/tool-chains/runs/${view.runId}`);
    expect(again.status).toBe(200);
    expect(RunViewSchema.parse(again.body)).toMatchObject({
      runId: view.runId,
      status: "completed",
      traceId: view.traceId,
    });
  });

  test("wait: false answers 202 at once with the run view and a Location", async () => {
    const r = await post("/api/tool-chains/run", {
      plan: { steps: [{ stepId: "g", skillName: "test.gate", arguments: { gate: "g1" } }] },
      wait: false,
    });
    expect(r.status).toBe(202);
    const view = RunViewSchema.parse(r.body);
    expect(["queued", "planning", "running"]).toContain(view.status);
    expect(Date.parse(view.createdAt)).toBeGreaterThan(Date.now() - 60_000);
    expect(r.headers.get("location")).toBe(`/api/tool-chains/runs/${view.runId}`);
    await gates.untilEntered("g1");
    await waitFor(async () => (await get(r.headers.get("location")!)).body.steps[0].status === "running", {
      what: "step a running",
    });
    gates.open("g1");
    await waitFor(async () => (await get(`/api/tool-chains/runs/${view.runId}`)).body.status === "completed", {
      what: "run completed",
    });
  });

  test("invalid plans answer 400 with the validation code and create no run", async () => {
    const before = await runCount();
    const cases: [unknown, string][] = [
      [
        {
          steps: [
            { stepId: "a", skillName: "core.pass", dependsOn: ["b"] },
            { stepId: "b", skillName: "core.pass", dependsOn: ["a"] },
          ],
        },
        "PLAN_CYCLE",
      ],
      [{ steps: [{ stepId: "a", skillName: "core.pass", dependsOn: ["zz"] }] }, "UNKNOWN_DEPENDENCY"],
      [{ steps: [{ stepId: "a", skillName: "no.such" }] }, "UNKNOWN_SKILL"],
      [
        {
          steps: [
            { stepId: "a", skillName: "core.pass" },
            { stepId: "a", skillName: "core.pass" },
          ],
        },
        "DUPLICATE_STEP_ID",
      ],
      [
        {
          steps: [
            { stepId: "a", skillName: "core.pass", arguments: { value: { $ref: "steps.b.x" } } },
            { stepId: "b", skillName: "core.pass" },
          ],
        },
        "INVALID_REFERENCE",
      ],
      [{ steps: [{ stepId: "a", skillName: "core.pass", colour: "red" }] }, "PLAN_INVALID"],
      [{ steps: [] }, "PLAN_INVALID"],
      ["not a plan", "PLAN_INVALID"],
    ];
    for (const [plan, code] of cases) {
      const r = await post("/api/tool-chains/run", { plan });
      expect([r.status, r.body.error.code], JSON.stringify(plan)).toEqual([400, code]);
      expect(r.body.error.details.issues.length).toBeGreaterThan(0);
    }
    expect(
      (
        await post("/api/tool-chains/run", {
          plan: { steps: [{ stepId: "a", skillName: "core.pass", colour: "red" }] },
        })
      ).body.error.message,
    ).toContain("colour");
    // the workspace's allowlist is enforced by validation
    const denied = await post(
      "/api/tool-chains/run",
      { plan: { steps: [{ stepId: "w", skillName: "core.wait", arguments: { ms: 1 } }] } },
      keyB,
    );
    expect([denied.status, denied.body.error.code, denied.body.error.message]).toEqual([
      400,
      "SKILL_NOT_ALLOWED",
      'step "w": skill "core.wait" is not allowed in this workspace',
    ]);
    expect(await runCount()).toBe(before);
    expect(await runCount(keyB)).toBe(0);
  });

  test("bad requests answer stable 4xx codes, never 500", async () => {
    const raw = (body: string, headers: Record<string, string> = { "content-type": "application/json" }) =>
      call(api.url, "POST", "/api/tool-chains/run", { key: keyA, raw: body, headers });
    const expectErr = (r: { status: number; body: any }, status: number, code: string) => {
      expect([r.status, r.body?.error?.code]).toEqual([status, code]);
      ErrorResponseSchema.parse(r.body);
    };
    expectErr(await raw("{not json"), 400, "INVALID_JSON");
    expectErr(await raw('"just a string"'), 400, "INVALID_JSON");
    expectErr(await raw("[]"), 400, "INVALID_BODY");
    expectErr(await raw(JSON.stringify({ plan: plan1, wait: "yes" })), 400, "INVALID_BODY");
    expectErr(await raw(JSON.stringify({ plan: plan1, colour: "red" })), 400, "INVALID_BODY");
    expectErr(await raw(JSON.stringify({ plan: plan1, memory: [1] })), 400, "INVALID_BODY");
    expectErr(await raw(JSON.stringify({ context: {} })), 400, "INVALID_BODY");
    expectErr(await raw(""), 400, "INVALID_BODY");
    expectErr(await raw("plan=1", { "content-type": "text/plain" }), 415, "UNSUPPORTED_MEDIA_TYPE");
    expectErr(
      await raw(JSON.stringify({ plan: plan1, context: { big: "x".repeat(1_100_000) } })),
      413,
      "PAYLOAD_TOO_LARGE",
    );
    const wrong = await raw(JSON.stringify({ plan: plan1, wait: "yes" }));
    expect(wrong.body.error.message).toBe("body.wait: Invalid input: expected boolean, received string");
    expectErr(await get("/api/nothing-here"), 404, "NOT_FOUND");
    expectErr(await call(api.url, "DELETE", "/api/tool-chains/run", { key: keyA }), 404, "NOT_FOUND");
    expectErr(await get("/api/tool-chains/runs?limit=0"), 400, "INVALID_QUERY");
    expectErr(await get("/api/tool-chains/runs?status=sleeping"), 400, "INVALID_QUERY");
    expectErr(await get("/api/tool-chains/runs?cursor=garbage"), 400, "INVALID_QUERY");
    expectErr(await get("/api/tool-chains/runs/nope/events?after=-1"), 400, "INVALID_QUERY");
  });

  test("autoPlan: the run is planned by the graph's planner node; without the skills to plan it, 422 PLANNING_FAILED (the failed run is kept); bad bodies create nothing", async () => {
    const before = await runCount();
    expect((await post("/api/tool-chains/run", { autoPlan: true })).body.error.code).toBe("INVALID_BODY");
    expect((await post("/api/tool-chains/run", { request: "x" })).body.error.code).toBe("INVALID_BODY");
    expect(await runCount()).toBe(before);
    // no model is configured here and workspace B may only use core.pass: the fallback cannot plan there
    const beforeB = await runCount(keyB);
    const r = await post("/api/tool-chains/run", { request: "plan an approval system", autoPlan: true }, keyB);
    expect([r.status, r.body.error.code]).toEqual([422, "PLANNING_FAILED"]);
    expect(r.body.error.details.missingSkills).toContain("qtable.task.split");
    expect(await runCount(keyB)).toBe(beforeB + 1);
    expect((await get(`/api/tool-chains/runs/${r.body.error.details.runId}`, keyB)).body).toMatchObject({
      status: "failed",
      error: { code: "PLANNING_FAILED" },
    });
    // workspace A has the QTable pack: the fallback plans it (no table in the context: split, estimate, Gantt) and it runs
    const ok = await post("/api/tool-chains/run", { request: "plan an approval system", autoPlan: true });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({
      status: "completed",
      planning: { kind: "fallback", fallbackReason: "not_configured" },
    });
    expect(ok.body.plan.steps.map((x: { stepId: string }) => x.stepId)).toEqual(["split", "estimate", "gantt"]);
  });

  test("another workspace's run answers 404 on every run route", async () => {
    const mine = (
      await post("/api/tool-chains/run", {
        plan: { steps: [{ stepId: "p", skillName: "test.publish", arguments: { title: "mine" } }] },
      })
    ).body;
    expect(mine.status).toBe("waiting_confirmation");
    const id = mine.runId as string;
    for (const r of [
      await get(`/api/tool-chains/runs/${id}`, keyB),
      await get(`/api/tool-chains/runs/${id}/events`, keyB),
      await get(`/api/tool-chains/runs/${id}/events`, keyB, { accept: "text/event-stream" }),
      await post(`/api/tool-chains/runs/${id}/confirm`, { stepId: "p", decision: "approve" }, keyB),
      await post(`/api/tool-chains/runs/${id}/cancel`, {}, keyB),
      await get(`/api/tool-chains/runs/does-not-exist`),
    ]) {
      expect([r.status, r.body.error.code]).toEqual([404, "RUN_NOT_FOUND"]);
    }
    expect(
      (await get(`/api/tool-chains/runs?limit=100`, keyB)).body.runs.map((x: { runId: string }) => x.runId),
    ).not.toContain(id);
    expect(ledger.total()).toBe(0);
    expect((await post(`/api/tool-chains/runs/${id}/cancel`, { reason: "test over" })).body.status).toBe("cancelled");
  });

  test("GET /runs lists the workspace's runs newest first, paginated, filtered by status", async () => {
    const key = await newKey(api.access, "ws-list");
    const ids: string[] = [];
    for (let i = 0; i < 5; i++)
      ids.push(
        (
          await post(
            "/api/tool-chains/run",
            {
              plan: {
                planId: `p${i}`,
                goal: `goal ${i}`,
                steps: [
                  {
                    stepId: "a",
                    skillName: i === 2 ? "core.fail" : "core.pass",
                    arguments: i === 2 ? {} : { value: i },
                    retry: { maxAttempts: 1 },
                  },
                ],
              },
            },
            key,
          )
        ).body.runId,
      );
    const pages: string[][] = [];
    let cursor: string | null = null;
    do {
      const r: { body: { runs: { runId: string }[]; nextCursor: string | null } } = await get(
        `/api/tool-chains/runs?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
        key,
      );
      RunListResponseSchema.parse(r.body);
      pages.push(r.body.runs.map((x) => x.runId));
      cursor = r.body.nextCursor;
    } while (cursor);
    expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
    expect(pages.flat()).toEqual([...ids].reverse());
    const first = (await get("/api/tool-chains/runs?limit=1", key)).body.runs[0];
    expect(first).toMatchObject({ runId: ids[4], status: "completed", planId: "p4", goal: "goal 4", stepCount: 1 });
    const failed = (await get("/api/tool-chains/runs?status=failed", key)).body.runs;
    expect(failed.map((x: { runId: string }) => x.runId)).toEqual([ids[2]]);
    expect((await get("/api/tool-chains/runs?status=failed,completed", key)).body.runs).toHaveLength(5);
    expect((await get("/api/tool-chains/runs?status=failed&status=completed&limit=3", key)).body.runs).toHaveLength(3);
  });

  test("GET /api/skills is the workspace's manifest", async () => {
    const all = SkillsResponseSchema.parse((await get("/api/skills")).body).skills;
    expect(all.map((s) => s.name)).toEqual(
      expect.arrayContaining(["core.pass", "core.wait", "core.fail", "test.publish"]),
    );
    const pub = all.find((s) => s.name === "test.publish")!;
    expect(pub).toMatchObject({
      sideEffects: "external",
      requiresConfirmation: true,
      compensable: true,
      previewable: true,
      idempotent: false,
    });
    expect((pub.inputSchema as { properties: object }).properties).toHaveProperty("title");
    expect((await get("/api/skills", keyB)).body.skills.map((s: { name: string }) => s.name)).toEqual(["core.pass"]);
  });

  test("GET /runs/:id/events as JSON, after a sequence number", async () => {
    const view = (await post("/api/tool-chains/run", { plan: plan1 })).body;
    const all = EventsResponseSchema.parse((await get(`/api/tool-chains/runs/${view.runId}/events`)).body).events;
    expect(all.map((e) => e.seq)).toEqual(all.map((_, i) => i + 1));
    expect(all.map((e) => e.type)).toEqual([
      "planning_started",
      "planning_completed",
      "step_started",
      "step_completed",
      "step_started",
      "step_completed",
      "run_completed",
    ]);
    expect(all[2]).toMatchObject({ runId: view.runId, seq: 3, type: "step_started", stepId: "a" });
    expect(all[0]).not.toHaveProperty("key");
    const tail = (await get(`/api/tool-chains/runs/${view.runId}/events?after=5`)).body.events;
    expect(tail.map((e: { seq: number }) => e.seq)).toEqual([6, 7]);
  });

  test("cancel a running run: running steps are aborted", async () => {
    const started = (
      await post("/api/tool-chains/run", {
        plan: {
          steps: [
            { stepId: "slow", skillName: "test.gate", arguments: { gate: "g2" } },
            { stepId: "after", skillName: "core.pass", dependsOn: ["slow"], arguments: { value: 1 } },
          ],
        },
        wait: false,
      })
    ).body;
    await gates.untilEntered("g2");
    const r = await post(`/api/tool-chains/runs/${started.runId}/cancel`, { reason: "no longer needed" });
    expect(r.status).toBe(200);
    expect(RunViewSchema.parse(r.body)).toMatchObject({ status: "cancelled" });
    expect(r.body.steps.map((s: { status: string }) => s.status)).toEqual(["cancelled", "cancelled"]);
    // cancelling again answers with the same final view
    expect((await post(`/api/tool-chains/runs/${started.runId}/cancel`)).body.status).toBe("cancelled");
  });

  test("/metrics: runs by status, step durations, retries, queue depth, confirmation wait", async () => {
    await post("/api/tool-chains/run", {
      plan: {
        steps: [
          {
            stepId: "f",
            skillName: "core.fail",
            arguments: { untilAttempt: 2, value: 1 },
            retry: { maxAttempts: 2, backoff: { kind: "fixed", initialMs: 1 } },
          },
        ],
      },
    });
    const w = (
      await post("/api/tool-chains/run", {
        plan: { steps: [{ stepId: "p", skillName: "test.publish", arguments: { title: "m" } }] },
      })
    ).body;
    await post(`/api/tool-chains/runs/${w.runId}/confirm`, { stepId: "p", decision: "approve" });
    const text = (await call(api.url, "GET", "/metrics")).text;
    const value = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
    expect(value(/^toolchain_runs\{status="completed"\} (\d+)/m)).toBeGreaterThan(0);
    expect(value(/^toolchain_queue_depth (\d+)/m)).toBe(0);
    expect(
      value(/^toolchain_step_duration_seconds_count\{skill="core.fail",outcome="completed"\} (\d+)/m),
    ).toBeGreaterThan(0);
    expect(value(/^toolchain_step_retries_total\{skill="core.fail"\} (\d+)/m)).toBeGreaterThan(0);
    expect(value(/^toolchain_confirmation_wait_seconds_count (\d+)/m)).toBeGreaterThan(0);
    expect(text).toMatch(
      /^toolchain_http_request_duration_seconds_count\{method="POST",route="\/api\/tool-chains\/run",status="200"\} \d+/m,
    );
  });
});

describe("per-key rate limit", () => {
  test("past the limit: 429 TOO_MANY_REQUESTS with Retry-After; other keys unaffected", async () => {
    const o = await postgresBackend.open();
    const api = await serveApi(o.runtime, o.db, { limits: { requestsPerMinute: 3 } });
    try {
      const k1 = await newKey(api.access, "rl-1");
      const k2 = await newKey(api.access, "rl-2");
      for (let i = 0; i < 3; i++) expect((await call(api.url, "GET", "/api/skills", { key: k1 })).status).toBe(200);
      const r = await call(api.url, "GET", "/api/skills", { key: k1 });
      expect([r.status, r.body.error.code]).toEqual([429, "TOO_MANY_REQUESTS"]);
      expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
      expect((await call(api.url, "GET", "/api/skills", { key: k2 })).status).toBe(200);
    } finally {
      await api.close();
      await o.close();
    }
  });
});
