/**
 * Planning over the REST API, on real Postgres (embedded, or the server at DATABASE_URL) with the
 * QTable pack on its Postgres table store and a scripted OpenAI-compatible model: POST /plan,
 * `autoPlan` on /run and /stream, and the fallback's approval-system chain end to end (waits at
 * the records confirmation, approved, the records are in the table, exactly once).
 */
import { rowsOf } from "../skills/qtable/mapping.js";
import type { Task } from "../skills/qtable/schemas.js";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { migrateQTable, PgTableStore, qtableSkills } from "../skills/qtable/index.js";
import { ErrorResponseSchema, PlanResponseSchema, RunViewSchema } from "../src/api/schemas.js";
import { Planner } from "../src/planner/index.js";
import { modelTaskSplitter } from "../src/planner/task-splitter.js";
import { Runtime } from "../src/runtime/runtime.js";
import { openDatabase, type Database } from "../src/store/db.js";
import { migrate } from "../src/store/migrations.js";
import { PgRunStore } from "../src/store/pg-run-store.js";
import { call, collectSse, newKey, serveApi, until, type ApiUnderTest } from "./helpers/api.js";
import { freshSchema, postgresBackend, serverUrl } from "./helpers/backends.js";
import { startMockOpenAi, type MockOpenAi } from "./helpers/openai-mock.js";

const REQUEST =
  "Plan an approval system, estimate the effort, build a timeline and put the tasks into the current table";

describe(`planner over the API on ${postgresBackend.name}`, () => {
  let mock: MockOpenAi;
  let db: Database;
  let runtime: Runtime;
  let api: ApiUnderTest;
  let tables: PgTableStore;
  let key: string;
  let narrowKey: string;
  let notifyLessKey: string;
  let tableId: string;
  const schema = freshSchema();
  const post = (path: string, body: unknown, k = key) => call(api.url, "POST", path, { key: k, body });
  const get = (path: string, k = key) => call(api.url, "GET", path, { key: k });

  beforeAll(async () => {
    mock = await startMockOpenAi();
    db = await openDatabase({ url: serverUrl, schema, poolSize: 4 });
    const saver = new PostgresSaver(db.pool, undefined, { schema });
    await migrate(db, saver);
    await migrateQTable(db);
    tables = new PgTableStore(db);
    runtime = new Runtime({
      skills: qtableSkills({ store: tables }),
      checkpointer: saver,
      store: new PgRunStore(db),
      planner: { model: "gpt-test", baseURL: mock.baseURL, timeoutMs: 5_000 },
    });
    api = await serveApi(runtime, db);
    key = await newKey(api.access, "ws-plan");
    narrowKey = await newKey(api.access, "ws-narrow", ["core.*"]);
    notifyLessKey = await newKey(api.access, "ws-quiet", [
      "core.*",
      "qtable.task.*",
      "qtable.gantt.*",
      "qtable.table.*",
    ]);
    tableId = (await tables.ensureWorkspace("ws-plan")).id;
  }, 180_000); // embedded Postgres migrations on a loaded 2-core machine
  afterAll(async () => {
    await api?.close();
    await runtime?.drain();
    if (db?.kind === "server") await db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
    await db?.close();
    await mock?.close();
  });

  test("POST /plan: the model's plan, which planner wrote it, the clamps and the DAG; nothing runs", async () => {
    mock.script({
      toolCall: {
        steps: [
          {
            stepId: "split",
            skillName: "qtable.task.split",
            arguments: { goal: "an approval system" },
            retry: { maxAttempts: 8 },
          },
          {
            stepId: "estimate",
            skillName: "qtable.task.estimate",
            dependsOn: ["split"],
            arguments: { tasks: { $ref: "steps.split.tasks" } },
          },
        ],
      },
    });
    const r = await post("/api/tool-chains/plan", {
      request: "Split and estimate an approval system",
      context: { table: { id: tableId } },
    });
    expect(r.status).toBe(200);
    const body = PlanResponseSchema.parse(r.body);
    expect(body.planner).toEqual({ kind: "llm", model: "gpt-test" });
    expect(body.plan.steps.map((s) => s.stepId)).toEqual(["split", "estimate"]);
    expect(body.warnings).toEqual([
      { code: "retry_capped", stepId: "split", message: 'step "split": retry.maxAttempts 8 capped at 3' },
    ]);
    expect(body.graph.mermaid).toContain("split --> estimate");
    expect(body.usage).toEqual({ inputTokens: 812, outputTokens: 164, totalTokens: 976 });
    expect((await get("/api/tool-chains/runs")).body.runs).toEqual([]);
  });

  test("POST /plan: bad bodies are 400 naming the field; a request nobody can plan is 422 PLANNING_FAILED naming what was understood", async () => {
    for (const bad of [{}, { request: "" }, { request: "x", extra: 1 }, { request: 42 }]) {
      const r = await post("/api/tool-chains/plan", bad);
      expect(r.status).toBe(400);
      expect(ErrorResponseSchema.parse(r.body).error.code).toBe("INVALID_BODY");
      expect(r.body.error.message).toMatch(/body/);
    }
    mock.script({ status: 500 });
    const r = await post("/api/tool-chains/plan", { request: "Tell me a joke about databases" });
    expect(r.status).toBe(422);
    expect(r.body.error.code).toBe("PLANNING_FAILED");
    expect(r.body.error.details.understood).toEqual({
      goal: "Tell me a joke about databases",
      intents: [],
      table: null,
    });
    expect(r.body.error.details.planner).toMatchObject({
      kind: "fallback",
      model: "gpt-test",
      fallbackReason: "http_error",
    });
    // the narrow workspace may not use the QTable skills: the fallback cannot plan there either
    mock.script({ status: 500 });
    const narrow = await post(
      "/api/tool-chains/plan",
      { request: REQUEST, context: { table: { id: tableId } } },
      narrowKey,
    );
    expect([narrow.status, narrow.body.error.code]).toEqual([422, "PLANNING_FAILED"]);
    expect(narrow.body.error.details.missingSkills).toContain("qtable.task.split");
  });

  test("the fallback's approval-system chain end to end: planned in the run, waits at the records confirmation, approved, records in the table once", async () => {
    mock.script({ status: 500, message: "model overloaded" });
    const r = await post("/api/tool-chains/run", {
      request: REQUEST,
      autoPlan: true,
      context: { table: { id: tableId }, startDate: "2026-12-07" },
    });
    expect(r.status).toBe(200);
    const view = RunViewSchema.parse(r.body);
    expect(view.status).toBe("waiting_confirmation");
    expect(view.planning).toMatchObject({
      kind: "fallback",
      model: "gpt-test",
      fallbackReason: "http_error",
      repairRounds: 0,
    });
    expect(view.plan.steps.map((s) => s.stepId)).toEqual(["split", "estimate", "schema", "gantt", "create"]);
    expect(
      view.steps
        .filter((s) => s.status === "completed")
        .map((s) => s.stepId)
        .sort(),
    ).toEqual(["estimate", "gantt", "schema", "split"]);
    expect(view.pendingConfirmations.map((p) => p.stepId)).toEqual(["create"]);
    const tasks = (view.steps.find((s) => s.stepId === "split")!.output as { tasks: Task[] }).tasks;
    // a row per task and per phase of several tasks
    const planned = rowsOf({ tasks });
    expect(tasks.some((t) => /approval system/i.test(t.title))).toBe(true);
    expect(JSON.stringify(view.pendingConfirmations[0]!.preview)).toContain(tasks[0]!.title);
    expect((await tables.listRecords("ws-plan", tableId))!.records).toEqual([]);

    const events = (await get(`/api/tool-chains/runs/${view.runId}/events`)).body.events as {
      type: string;
      data: Record<string, unknown>;
    }[];
    expect(events.slice(0, 2).map((e) => e.type)).toEqual(["planning_started", "planning_completed"]);
    expect(events[1]!.data).toMatchObject({
      planner: { kind: "fallback", fallbackReason: "http_error" },
      repairRounds: 0,
      steps: 5,
    });
    // the history row holds the plan the planner wrote
    const listed = (await get("/api/tool-chains/runs")).body.runs.find(
      (x: { runId: string }) => x.runId === view.runId,
    );
    expect(listed).toMatchObject({ stepCount: 5, planId: "fallback-task-plan", goal: REQUEST });

    const done = await post(`/api/tool-chains/runs/${view.runId}/confirm`, { stepId: "create", decision: "approve" });
    expect(done.status).toBe(200);
    expect(done.body.status).toBe("completed");
    const records = (await tables.listRecords("ws-plan", tableId))!.records;
    expect(records).toHaveLength(planned.length);
    const gantt = view.steps.find((s) => s.stepId === "gantt")!.output as {
      items: { key: string; start: string; end: string }[];
    };
    expect(records.map((x) => x.values.title).sort()).toEqual(planned.map((t) => t.title).sort());
    expect(records.every((x) => typeof x.values.start === "string" && typeof x.values.end === "string")).toBe(true);
    // (a phase row starts with its first task)
    expect(new Set(records.map((x) => x.values.start))).toEqual(new Set(gantt.items.map((i) => i.start)));
    // the same decision again resumes nothing and writes nothing
    await post(`/api/tool-chains/runs/${view.runId}/confirm`, { stepId: "create", decision: "approve" });
    expect((await tables.listRecords("ws-plan", tableId))!.records).toHaveLength(planned.length);
  });

  test("models misbehaving over the API: a refusal and a masked key are named without the provider's text; 429 then a plan is retried; an unstorable plan is repaired or replaced, never a DRIVE_FAILED run", async () => {
    mock.reset();
    mock.script({ refusal: "I can't help with that." });
    const refused = await post("/api/tool-chains/plan", { request: REQUEST, context: { table: { id: tableId } } });
    expect(refused.status).toBe(200);
    expect(PlanResponseSchema.parse(refused.body).planner).toEqual({
      kind: "fallback",
      model: "gpt-test",
      fallbackReason: "refused",
      fallbackDetail: 'the model refused: "I can\'t help with that."',
    });

    mock.reset();
    mock.script({ status: 401, message: "Incorrect API key provided: sk-proj-ab*****yz." });
    const badKey = await post("/api/tool-chains/plan", { request: REQUEST, context: { table: { id: tableId } } });
    expect(badKey.body.planner).toMatchObject({
      fallbackReason: "http_error",
      fallbackDetail: "the model endpoint refused the credentials (HTTP 401)",
    });
    expect(JSON.stringify(badKey.body)).not.toContain("sk-proj");

    mock.reset();
    mock.script(
      { status: 429, headers: { "retry-after": "0" } },
      {
        toolCall: {
          steps: [{ stepId: "split", skillName: "qtable.task.split", arguments: { goal: "an approval system" } }],
        },
      },
    );
    const retried = await post("/api/tool-chains/run", {
      request: "Split an approval system",
      autoPlan: true,
      context: {},
    });
    expect(RunViewSchema.parse(retried.body)).toMatchObject({
      status: "completed",
      planning: { kind: "llm", model: "gpt-test", repairRounds: 0 },
    });

    mock.reset();
    const nul = {
      toolCall: {
        steps: [{ stepId: "split", skillName: "qtable.task.split", arguments: { goal: "an approval\u0000 system" } }],
      },
    };
    mock.script(nul, nul);
    const unstorable = await post("/api/tool-chains/run", {
      request: REQUEST,
      autoPlan: true,
      context: { table: { id: tableId }, startDate: "2026-12-07" },
    });
    expect(unstorable.status).toBe(200);
    const view = RunViewSchema.parse(unstorable.body);
    expect(view.status).toBe("waiting_confirmation");
    expect(view.planning).toMatchObject({ kind: "fallback", fallbackReason: "validation_failed", repairRounds: 1 });
    expect(view.planning!.fallbackDetail).toContain(
      "UNSUPPORTED_VALUE: plan.steps.0.arguments.goal: contains the NUL character",
    );
    expect(mock.requests.at(-1)!.messages.at(-1).content).toContain("UNSUPPORTED_VALUE");
  });

  test("answers as real models write them, over POST /plan: prose, fences and tool-call text are read; a truncated answer and a 500 then a plan are named or retried", async () => {
    const plan = {
      steps: [{ stepId: "split", skillName: "qtable.task.split", arguments: { goal: "an approval system" } }],
    };
    const json = JSON.stringify(plan);
    for (const answer of [
      { content: `Here is the plan:\n${json}\nGood luck!` },
      { content: "```json\n" + json + "\n```" },
      { toolCall: "```json\n" + json + "\n```" },
      { toolCall: JSON.stringify(json) },
    ]) {
      mock.reset();
      mock.script(answer);
      const r = await post("/api/tool-chains/plan", { request: "Split an approval system" });
      expect([r.status, r.body.planner, r.body.repairRounds]).toEqual([200, { kind: "llm", model: "gpt-test" }, 0]);
      expect(r.body.plan.steps.map((x: { stepId: string }) => x.stepId)).toEqual(["split"]);
    }
    mock.reset();
    mock.script({ toolCall: '{"steps":[{"stepId":"split","skillName":"qtable.ta', finish: "length" });
    const cut = await post("/api/tool-chains/plan", { request: REQUEST, context: { table: { id: tableId } } });
    expect(cut.body.planner).toMatchObject({ kind: "fallback", fallbackReason: "truncated" });
    mock.reset();
    mock.script({ status: 500 }, { toolCall: plan });
    const flaky = await post("/api/tool-chains/plan", { request: "Split an approval system" });
    expect(flaky.body.planner).toEqual({ kind: "llm", model: "gpt-test" });
  });

  test("a stall over autoPlan is paid once: the planner times out, the run's split step does not wait for the endpoint again", async () => {
    const config = { model: "gpt-stall", baseURL: mock.baseURL, timeoutMs: 1_000 };
    const skills = qtableSkills({ store: tables, splitWith: modelTaskSplitter(config) });
    const stalled = new Runtime({
      skills,
      checkpointer: new PostgresSaver(db.pool, undefined, { schema }),
      store: new PgRunStore(db),
      planner: config,
    });
    const stallApi = await serveApi(stalled, db, { access: api.access });
    try {
      mock.reset();
      mock.script({ hang: true });
      const before = mock.requests.length;
      const r = await call(stallApi.url, "POST", "/api/tool-chains/run", {
        key,
        body: {
          request: "Plan and estimate a website relaunch, build a timeline",
          autoPlan: true,
          context: { startDate: "2026-12-07" },
        },
      });
      expect(RunViewSchema.parse(r.body)).toMatchObject({
        status: "completed",
        planning: { kind: "fallback", fallbackReason: "timeout" },
      });
      // paid once: the split step never asked the stalled endpoint again (counted, not timed)
      expect(mock.requests.length - before).toBe(1);
    } finally {
      await stallApi.close();
      await stalled.drain();
    }
  });

  test("a hand-written plan reading a field its step's skill cannot output is 400 UNKNOWN_OUTPUT_FIELD before anything runs; the fallback names what it leaves out", async () => {
    const plan = {
      steps: [
        { stepId: "split", skillName: "qtable.task.split", arguments: { goal: "an approval system" } },
        {
          stepId: "estimate",
          skillName: "qtable.task.estimate",
          dependsOn: ["split"],
          arguments: { tasks: { $ref: "steps.split.taskList" } },
        },
      ],
    };
    const before = (await get("/api/tool-chains/runs")).body.runs.length;
    const r = await post("/api/tool-chains/run", { plan });
    expect(r.status).toBe(400);
    expect(ErrorResponseSchema.parse(r.body).error).toMatchObject({
      code: "UNKNOWN_OUTPUT_FIELD",
      message: expect.stringContaining(
        'step "estimate": arguments.tasks: $ref "steps.split.taskList" names "taskList", which the output of step "split" (qtable.task.split) cannot have; it declares "tasks"',
      ),
    });
    expect((await get("/api/tool-chains/runs")).body.runs).toHaveLength(before);

    mock.reset();
    mock.script({ status: 400, message: "Invalid schema" });
    const dropped = await post(
      "/api/tool-chains/plan",
      { request: "Plan an approval system, estimate it and announce it in #approvals", context: {} },
      notifyLessKey,
    );
    expect(dropped.status).toBe(200);
    expect(PlanResponseSchema.parse(dropped.body).warnings).toContainEqual({
      code: "request_part_dropped",
      message:
        'the plan leaves out "announce it in #approvals": the fallback planner only splits, estimates and schedules work and writes the task records (send a plan, or configure a model, for the rest)',
    });
  });

  test("/stream with autoPlan: the planning events come first, then the run's", async () => {
    mock.script({ hang: true });
    const fast = new Runtime({
      skills: runtime.registry,
      checkpointer: new PostgresSaver(db.pool, undefined, { schema }),
      store: new PgRunStore(db),
      planner: { model: "gpt-test", baseURL: mock.baseURL, timeoutMs: 200 },
    });
    const streamApi = await serveApi(fast, db, { access: api.access });
    try {
      const msgs = await collectSse(`${streamApi.url}/api/tool-chains/stream`, {
        method: "POST",
        key,
        body: { request: "Estimate and schedule a website relaunch", autoPlan: true, context: {} },
      });
      const types = msgs.map((m) => m.event);
      expect(types.slice(0, 2)).toEqual(["planning_started", "planning_completed"]);
      expect(msgs[1]!.data.data.planner).toMatchObject({ kind: "fallback", fallbackReason: "timeout" });
      expect(msgs[1]!.data.data.warnings).toEqual([expect.objectContaining({ code: "no_target_table" })]);
      expect(types.at(-1)).toBe("run_completed");
      expect(msgs.map((m) => Number(m.id))).toEqual(msgs.map((_, i) => i + 1));
    } finally {
      await streamApi.close();
      await fast.drain();
    }
  });

  test("/run with autoPlan and a request nobody can plan: 422 PLANNING_FAILED with the failed run's id and its planning_failed event", async () => {
    mock.script({ status: 500 });
    const r = await post("/api/tool-chains/run", { request: "What's the weather in Lisbon?", autoPlan: true });
    expect(r.status).toBe(422);
    expect(r.body.error.code).toBe("PLANNING_FAILED");
    const runId = r.body.error.details.runId as string;
    const run = await get(`/api/tool-chains/runs/${runId}`);
    expect(RunViewSchema.parse(run.body)).toMatchObject({
      status: "failed",
      error: { code: "PLANNING_FAILED" },
      plan: { steps: [] },
    });
    const types = (await get(`/api/tool-chains/runs/${runId}/events`)).body.events.map((e: { type: string }) => e.type);
    expect(types).toEqual(["planning_started", "planning_failed", "run_failed"]);
  });

  test("a queued run (API-only process) is planned by the worker that takes it, with the submitter's allowlist", async () => {
    const worker = new Runtime({
      skills: runtime.registry,
      checkpointer: new PostgresSaver(db.pool, undefined, { schema }),
      store: new PgRunStore(db),
      owner: "worker",
      planner: new Planner({ registry: runtime.registry }),
    });
    try {
      const context = { table: { id: tableId }, startDate: "2026-12-07" };
      const ok = await runtime.submitRequest(REQUEST, { context, workspaceId: "ws-plan" });
      const narrow = await runtime.submitRequest(REQUEST, {
        context,
        workspaceId: "ws-plan",
        allowSkill: (n) => n !== "qtable.table.schema.describe",
      });
      expect((await runtime.store.getRow(ok.runId))!.status).toBe("queued");
      await until(
        async () =>
          ((await worker.recover()).length ? false : true) &&
          ["waiting_confirmation", "failed"].includes((await runtime.store.getRow(ok.runId))!.status) &&
          (await runtime.store.getRow(narrow.runId))!.status === "failed",
        60_000,
      );
      await worker.drain();
      const planned = await worker.getRun(ok.runId);
      expect(planned.status).toBe("waiting_confirmation");
      expect(planned.planning).toMatchObject({ kind: "fallback", fallbackReason: "not_configured" });
      expect((await runtime.store.getRow(ok.runId))!.plan.steps).toHaveLength(5);
      const refused = await worker.getRun(narrow.runId);
      expect(refused.error).toMatchObject({
        code: "PLANNING_FAILED",
        details: { missingSkills: ["qtable.table.schema.describe"] },
      });
    } finally {
      await worker.drain();
    }
  });
});
