/**
 * /api/tables and the approval-system chain over real HTTP on Postgres (embedded, or the server at
 * DATABASE_URL): workspace scoping, bad bodies, paging, the skills in the manifest, OpenAPI.
 */
import { validate as validateOpenApi } from "@readme/openapi-parser";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  ErrorResponseSchema,
  RecordListResponseSchema,
  RunViewSchema,
  SkillsResponseSchema,
  TableListResponseSchema,
  TableSchema,
} from "../src/api/schemas.js";
import { PgTableStore } from "../skills/qtable/pg-store.js";
import { QTABLE_SKILL_NAMES } from "../skills/qtable/index.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, newKey, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { approvalPlan } from "./helpers/qtable.js";

describe(`tables API on ${postgresBackend.name}`, () => {
  let api: ApiUnderTest;
  let close: () => Promise<void>;
  let keyA: string;
  let keyB: string;
  let keyCore: string;
  const get = (path: string, key = keyA) => call(api.url, "GET", path, { key });
  const post = (path: string, body?: unknown, key = keyA) => call(api.url, "POST", path, { key, body });
  const expectError = (r: { status: number; body: unknown }, status: number, code: string, message?: string) => {
    expect(r.status).toBe(status);
    const e = ErrorResponseSchema.parse(r.body).error;
    expect(e.code).toBe(code);
    if (message) expect(e.message).toContain(message);
  };

  beforeAll(async () => {
    const o = await postgresBackend.open();
    api = await serveApi(o.runtime, o.db, { tables: new PgTableStore(o.db!) });
    close = async () => {
      await api.close();
      await o.close();
    };
    keyA = await newKey(api.access, "qa");
    keyB = await newKey(api.access, "qb");
    keyCore = await newKey(api.access, "qcore", ["core.*"]);
  });
  afterAll(() => close?.());

  test("a workspace has its demo Tasks table; tables are created with a typed schema", async () => {
    const list = TableListResponseSchema.parse((await get("/api/tables")).body);
    expect(list.tables).toHaveLength(1);
    expect(list.tables[0]).toMatchObject({ name: "Tasks" });
    expect(list.tables[0]!.fields.map((f) => [f.name, f.type])).toEqual(
      expect.arrayContaining([
        ["title", "text"],
        ["description", "text"],
        ["estimateDays", "number"],
        ["start", "date"],
        ["end", "date"],
        ["status", "select"],
        ["dependsOn", "relation"],
        ["key", "text"],
      ]),
    );
    expect(list.tables[0]!.fields.find((f) => f.name === "status")!.options).toEqual([
      "todo",
      "doing",
      "done",
      "removed",
    ]);

    const created = await post("/api/tables", {
      name: "Risks",
      fields: [
        { name: "title", type: "text", required: true },
        { name: "level", type: "select", options: ["low", "high"] },
        { name: "owner", type: "user" },
      ],
    });
    expect(created.status).toBe(201);
    const t = TableSchema.parse(created.body);
    expect(created.headers.get("location")).toBe(`/api/tables/${t.id}`);
    expect((await get(`/api/tables/${t.id}`)).body).toEqual(t);
    expect(TableListResponseSchema.parse((await get("/api/tables")).body).tables.map((x) => x.name)).toEqual([
      "Tasks",
      "Risks",
    ]);
    expectError(
      await post("/api/tables", { name: "Risks", fields: [{ name: "x", type: "text" }] }),
      409,
      "TABLE_NAME_TAKEN",
    );
  });

  test("bad bodies answer 400 INVALID_BODY naming the field; nothing is created", async () => {
    expectError(await post("/api/tables", { fields: [{ name: "x", type: "text" }] }), 400, "INVALID_BODY", "body.name");
    expectError(
      await post("/api/tables", { name: "S", fields: [{ name: "s", type: "select" }] }),
      400,
      "INVALID_BODY",
      "body.fields.0.options",
    );
    expectError(
      await post("/api/tables", { name: "S", fields: [{ name: "s", type: "blob" }] }),
      400,
      "INVALID_BODY",
      "body.fields.0.type",
    );
    expectError(
      await post("/api/tables", {
        name: "S",
        fields: [
          { name: "a", type: "text" },
          { name: "a", type: "number" },
        ],
      }),
      400,
      "INVALID_BODY",
      "body.fields.1.name",
    );
    expectError(await post("/api/tables", { name: "S", fields: [] }), 400, "INVALID_BODY", "body.fields");
    expectError(
      await post("/api/tables", { name: "S", fields: [{ name: "x", type: "text" }], color: "red" }),
      400,
      "INVALID_BODY",
    );
    expectError(
      await post("/api/tables", { name: "S", fields: [{ name: "1bad", type: "text" }] }),
      400,
      "INVALID_BODY",
      "body.fields.0.name",
    );
    expect(TableListResponseSchema.parse((await get("/api/tables")).body).tables.map((x) => x.name)).not.toContain("S");
  });

  test("another workspace's table answers 404, like a missing one", async () => {
    const [tasks] = TableListResponseSchema.parse((await get("/api/tables")).body).tables;
    expectError(await get(`/api/tables/${tasks!.id}`, keyB), 404, "TABLE_NOT_FOUND");
    expectError(await get(`/api/tables/${tasks!.id}/records`, keyB), 404, "TABLE_NOT_FOUND");
    expectError(await get("/api/tables/tbl_missing"), 404, "TABLE_NOT_FOUND");
    expect(TableListResponseSchema.parse((await get("/api/tables", keyB)).body).tables.map((t) => t.id)).not.toContain(
      tasks!.id,
    );
    expectError(await call(api.url, "GET", "/api/tables"), 401, "UNAUTHORIZED");
  });

  test("the chain over HTTP: waits with the preview, approved, records listed page by page", async () => {
    const [tasks] = TableListResponseSchema.parse((await get("/api/tables")).body).tables;
    const context = {
      goal: "Plan an approval system with an audit log",
      table: { id: tasks!.id },
      startDate: "2026-12-21",
      holidays: ["2026-12-25"],
    };
    const started = await post("/api/tool-chains/run", { plan: approvalPlan(), context });
    expect(started.status).toBe(200);
    const waiting = RunViewSchema.parse(started.body);
    expect(waiting.status).toBe("waiting_confirmation");
    const preview = waiting.pendingConfirmations[0]!.preview as { count: number; records: { title: string }[] };
    expect(preview.records.map((r) => r.title)).toContain("Build audit log for the approval system");
    expect(RecordListResponseSchema.parse((await get(`/api/tables/${tasks!.id}/records`)).body).records).toEqual([]);
    // another workspace cannot approve it
    expectError(
      await post(`/api/tool-chains/runs/${waiting.runId}/confirm`, { stepId: "create", decision: "approve" }, keyB),
      404,
      "RUN_NOT_FOUND",
    );

    const done = RunViewSchema.parse(
      (await post(`/api/tool-chains/runs/${waiting.runId}/confirm`, { stepId: "create", decision: "approve" })).body,
    );
    expect(done.status).toBe("completed");
    const all: Record<string, unknown>[] = [];
    let cursor: string | null = null;
    do {
      const page = RecordListResponseSchema.parse(
        (await get(`/api/tables/${tasks!.id}/records?limit=3${cursor ? `&cursor=${cursor}` : ""}`)).body,
      );
      expect(page.records.length).toBeLessThanOrEqual(3);
      all.push(...page.records);
      cursor = page.nextCursor;
    } while (cursor);
    expect(all).toHaveLength(preview.count);
    expect(all.map((r) => r.title)).toEqual(preview.records.map((r) => r.title));
    for (const r of all)
      expect(r).toMatchObject({
        id: expect.stringMatching(/^rec_/),
        start: expect.stringMatching(/^\d{4}-\d{2}-\d{2}$/),
        end: expect.stringMatching(/^\d{4}-\d{2}-\d{2}$/),
        status: "todo",
      });
    expectError(await get(`/api/tables/${tasks!.id}/records?limit=0`), 400, "INVALID_QUERY", "query.limit");
    expectError(await get(`/api/tables/${tasks!.id}/records?cursor=abc`), 400, "INVALID_QUERY", "query.cursor");
  });

  test("the skills are in the manifest with their schemas; a workspace's allowlist still applies", async () => {
    const skills = SkillsResponseSchema.parse((await get("/api/skills")).body).skills;
    for (const n of QTABLE_SKILL_NAMES) expect(skills.map((s) => s.name)).toContain(n);
    const create = skills.find((s) => s.name === "qtable.task.records.create")!;
    expect(create).toMatchObject({
      sideEffects: "write",
      idempotent: true,
      requiresConfirmation: true,
      compensable: true,
      previewable: true,
    });
    expect(skills.find((s) => s.name === "qtable.notify.send")).toMatchObject({
      sideEffects: "external",
      idempotent: false,
      requiresConfirmation: true,
      compensable: false,
    });
    expect(skills.find((s) => s.name === "qtable.task.split")).toMatchObject({
      sideEffects: "none",
      inputSchema: { properties: { goal: { type: "string" } } },
    });
    expect(skills.find((s) => s.name === "qtable.table.schema.describe")).toMatchObject({ sideEffects: "read" });
    const core = SkillsResponseSchema.parse((await get("/api/skills", keyCore)).body).skills;
    expect(core.some((s) => s.name.startsWith("qtable."))).toBe(false);
    expectError(
      await post(
        "/api/tool-chains/run",
        { plan: { steps: [{ stepId: "s", skillName: "qtable.task.split", arguments: { goal: "x" } }] } },
        keyCore,
      ),
      400,
      "SKILL_NOT_ALLOWED",
    );
  });

  test("a stored workspace calendar: set by PUT /api/calendar (bad fields named), used by the Gantt before the configuration, under a run's context", async () => {
    const keyCal = await newKey(api.access, "qcal");
    const put = (body: unknown, key = keyCal) => call(api.url, "PUT", "/api/calendar", { key, body });
    expectError(await put({ workdays: [1, 8] }), 400, "INVALID_BODY", "body.workdays.1");
    expectError(await put({ timezone: "Mars/Base" }), 400, "INVALID_BODY", "body.timezone: an IANA time zone");
    expectError(await put({ holidays: ["05/01/2027"] }), 400, "INVALID_BODY", "body.holidays.0");
    expectError(await put({ weekdays: [1] }), 400, "INVALID_BODY", "body");
    const cal = { locale: "DE", workdays: [1, 2, 3, 4], holidays: ["2027-01-05"], timezone: "Europe/Berlin" };
    const set = await put(cal);
    expect(set.status).toBe(200);
    expect(set.body).toEqual({
      calendar: cal,
      effective: { locale: "DE", workdays: [1, 2, 3, 4], holidays: ["2027-01-05"], timeZone: "Europe/Berlin" },
    });
    expect((await call(api.url, "GET", "/api/calendar", { key: keyCal })).body).toEqual(set.body);
    // another workspace keeps the configuration's
    expect((await get("/api/calendar", keyB)).body).toMatchObject({
      calendar: {},
      effective: { workdays: [1, 2, 3, 4, 5] },
    });

    const plan = approvalPlan();
    plan.steps = plan.steps.filter((s: { stepId: string }) => ["split", "estimate", "gantt"].includes(s.stepId));
    delete plan.steps[2].arguments.holidays;
    const gantt = async (context: Record<string, unknown>) => {
      const r = await post(
        "/api/tool-chains/run",
        { plan, context: { goal: "Plan a billing portal", ...context } },
        keyCal,
      );
      const v = RunViewSchema.parse(r.body);
      expect(v.status).toBe("completed");
      return v.steps.find((s) => s.stepId === "gantt")!.output as {
        items: { start: string; end: string }[];
        calendar: { workdays: number[]; locale: string; holidays: string[] };
      };
    };
    const g = await gantt({ startDate: "2027-01-04" });
    expect(g.calendar).toMatchObject({ workdays: [1, 2, 3, 4], locale: "DE" });
    expect(g.calendar.holidays).toContain("2027-01-05");
    for (const i of g.items)
      for (const d of [i.start, i.end]) {
        expect(d).not.toBe("2027-01-05");
        expect(new Date(`${d}T00:00:00Z`).getUTCDay()).not.toBe(5); // no Fridays
      }
    // a run's context still says the last word
    expect(
      (await gantt({ startDate: "2027-01-04", calendar: { workdays: [1, 2, 3, 4, 5] } })).calendar.workdays,
    ).toEqual([1, 2, 3, 4, 5]);
    // {} clears it
    expect((await put({})).body).toMatchObject({
      calendar: {},
      effective: { workdays: [1, 2, 3, 4, 5], timeZone: "UTC" },
    });
  });

  test("the OpenAPI document describes the table routes and stays valid", async () => {
    const doc = (await call(api.url, "GET", "/openapi.json")).body;
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        "/api/tables",
        "/api/tables/{tableId}",
        "/api/tables/{tableId}/records",
        "/api/calendar",
      ]),
    );
    expect(doc.paths["/api/tables"].post.responses["201"]).toBeDefined();
    expect(doc.components.schemas.CreateTableRequest.properties.fields.items.properties.type.enum).toEqual([
      "text",
      "number",
      "date",
      "select",
      "user",
      "relation",
    ]);
    const result = await validateOpenApi(structuredClone(doc));
    expect(result.valid, JSON.stringify(result)).toBe(true);
  });
});
