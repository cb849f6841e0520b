/**
 * Tables bounds (issue 21) as a user meets them, over real HTTP on Postgres (embedded, or the
 * server at DATABASE_URL), configured through the environment like a server: GET /api/tables pages
 * with a cursor; a workspace's table and record quotas answer QUOTA_EXCEEDED; a table definition
 * over its bounds answers VALUE_TOO_LARGE; a records write over its byte bound fails its step
 * with VALUE_TOO_LARGE before anything is written, however few records it has.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ErrorResponseSchema, TableListResponseSchema } from "../src/api/schemas.js";
import { DEFAULT_TABLE_LIMITS, tableLimitsFromEnv } from "../skills/qtable/limits.js";
import { PgTableStore } from "../skills/qtable/pg-store.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, newKey, serveApi, type ApiUnderTest, type Reply } from "./helpers/api.js";

const ENV = {
  TOOLCHAIN_MAX_TABLES_PER_WORKSPACE: "4",
  TOOLCHAIN_MAX_RECORDS_PER_WORKSPACE: "6",
  TOOLCHAIN_MAX_TABLE_FIELDS: "5",
  TOOLCHAIN_MAX_TABLE_DEFINITION_BYTES: "2000",
  TOOLCHAIN_MAX_RECORDS_WRITE_BYTES: "1000",
};

test("the bounds come from the environment, with defaults; a bad value names its variable", () => {
  expect(tableLimitsFromEnv({})).toEqual(DEFAULT_TABLE_LIMITS);
  expect(DEFAULT_TABLE_LIMITS).toEqual({
    tablesPerWorkspace: 100,
    recordsPerWorkspace: 100_000,
    fieldsPerTable: 100,
    tableDefinitionBytes: 32_768,
    writeBytes: 1_048_576,
  });
  expect(tableLimitsFromEnv(ENV)).toEqual({
    tablesPerWorkspace: 4,
    recordsPerWorkspace: 6,
    fieldsPerTable: 5,
    tableDefinitionBytes: 2000,
    writeBytes: 1000,
  });
  expect(() => tableLimitsFromEnv({ TOOLCHAIN_MAX_TABLES_PER_WORKSPACE: "0" })).toThrow(
    'Expected TOOLCHAIN_MAX_TABLES_PER_WORKSPACE to be an integer from 1 to 1000000, got "0"',
  );
  expect(() => tableLimitsFromEnv({ TOOLCHAIN_MAX_TABLE_FIELDS: "101" })).toThrow("TOOLCHAIN_MAX_TABLE_FIELDS");
  expect(() => tableLimitsFromEnv({ TOOLCHAIN_MAX_RECORDS_WRITE_BYTES: "1.5" })).toThrow(
    "TOOLCHAIN_MAX_RECORDS_WRITE_BYTES",
  );
});

describe(`tables bounds over HTTP on ${postgresBackend.name}`, () => {
  let api: ApiUnderTest;
  let close: () => Promise<void>;
  let key: string;
  const saved: Record<string, string | undefined> = {};
  const get = (path: string) => call(api.url, "GET", path, { key });
  const post = (path: string, body: unknown) => call(api.url, "POST", path, { key, body });
  const expectError = (r: Reply, status: number, code: string, message: string) => {
    expect(r.status, r.text).toBe(status);
    const e = ErrorResponseSchema.parse(r.body).error;
    expect([e.code, e.message]).toEqual([code, expect.stringContaining(message)]);
    return e;
  };

  beforeAll(async () => {
    for (const [k, v] of Object.entries(ENV)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
    // openRuntime reads the bounds for the skills' store; the API's store reads the same
    const o = await postgresBackend.open();
    api = await serveApi(o.runtime, o.db, { tables: new PgTableStore(o.db!, { limits: tableLimitsFromEnv() }) });
    close = async () => {
      await api.close();
      await o.close();
    };
    key = await newKey(api.access, "bounded");
  });
  afterAll(async () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    await close?.();
  });

  test("tables page with limit and cursor; past the quota, QUOTA_EXCEEDED (409) names it", async () => {
    for (const name of ["A", "B", "C"])
      expect((await post("/api/tables", { name, fields: [{ name: "title", type: "text" }] })).status).toBe(201);
    const names: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = TableListResponseSchema.parse(
        (await get(`/api/tables?limit=3${cursor ? `&cursor=${cursor}` : ""}`)).body,
      );
      names.push(...page.tables.map((t) => t.name));
      cursor = page.nextCursor;
      pages++;
    } while (cursor);
    expect([names, pages]).toEqual([["Tasks", "A", "B", "C"], 2]);
    const e = expectError(
      await post("/api/tables", { name: "D", fields: [{ name: "title", type: "text" }] }),
      409,
      "QUOTA_EXCEEDED",
      "4 tables",
    );
    expect(e.details).toEqual({ quota: "tables", limit: 4 });
    expect(TableListResponseSchema.parse((await get("/api/tables?limit=100")).body).tables).toHaveLength(4);
  });

  test("a definition with too many fields or too many bytes: VALUE_TOO_LARGE (400) naming the field", async () => {
    const other = await newKey(api.access, "wide");
    const fields = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `f${i}`, type: "text" }));
    const r1 = await call(api.url, "POST", "/api/tables", { key: other, body: { name: "Wide", fields: fields(6) } });
    expectError(r1, 400, "VALUE_TOO_LARGE", "fields: a table has at most 5 fields, got 6");
    const options = Array.from({ length: 50 }, (_, i) => `${i}-${"o".repeat(60)}`);
    const r2 = await call(api.url, "POST", "/api/tables", {
      key: other,
      body: { name: "Opts", fields: [{ name: "s", type: "select", options }] },
    });
    expectError(r2, 400, "VALUE_TOO_LARGE", "over the limit of 2000");
    expect(
      TableListResponseSchema.parse((await call(api.url, "GET", "/api/tables", { key: other })).body).tables.map(
        (t) => t.name,
      ),
    ).toEqual(["Tasks"]);
  });

  test("records.create: over the write's byte bound the step fails VALUE_TOO_LARGE; over the record quota QUOTA_EXCEEDED; nothing is written", async () => {
    const owner = await newKey(api.access, "writer");
    const tasks = (await call(api.url, "GET", "/api/tables", { key: owner })).body.tables[0];
    const run = (records: unknown[]) =>
      call(api.url, "POST", "/api/tool-chains/run", {
        key: owner,
        body: {
          plan: {
            steps: [
              {
                stepId: "w",
                skillName: "qtable.task.records.create",
                arguments: { tableId: tasks.id, records },
                retry: { maxAttempts: 1 },
              },
            ],
          },
        },
      });
    const confirmed = async (r: Reply) =>
      r.body.status === "waiting_confirmation"
        ? call(api.url, "POST", `/api/tool-chains/runs/${r.body.runId}/confirm`, {
            key: owner,
            body: { stepId: "w", decision: "approve" },
          })
        : r;
    // two records, over 1000 bytes: refused when the preview is computed, before any approval
    const big = await confirmed(await run([{ title: "x".repeat(600) }, { title: "y".repeat(600) }]));
    const step = big.body.steps.find((s: { stepId: string }) => s.stepId === "w");
    expect([big.body.status, step.error.code], big.text.slice(0, 300)).toEqual(["failed", "VALUE_TOO_LARGE"]);
    expect(step.error.message).toContain("records: 2 records are");
    // within bounds: written
    expect(
      (await confirmed(await run([{ title: "1" }, { title: "2" }, { title: "3" }, { title: "4" }]))).body.status,
    ).toBe("completed");
    // three more would pass the workspace's 6 records
    const over = await confirmed(await run([{ title: "5" }, { title: "6" }, { title: "7" }]));
    const s2 = over.body.steps.find((s: { stepId: string }) => s.stepId === "w");
    expect([over.body.status, s2.error.code], over.text.slice(0, 300)).toEqual(["failed", "QUOTA_EXCEEDED"]);
    expect(s2.error.details).toMatchObject({ quota: "records", limit: 6, have: 4, adding: 3 });
    const records = (await call(api.url, "GET", `/api/tables/${tasks.id}/records`, { key: owner })).body.records;
    expect(records.map((r: { title: string }) => r.title)).toEqual(["1", "2", "3", "4"]);
  });
});
