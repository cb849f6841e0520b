/**
 * Hostile input never answers 500 (issue 21), on every route the OpenAPI document lists, /mcp and
 * the table routes included, over real HTTP on Postgres (embedded, or the server at DATABASE_URL):
 * - the known cases, each a stable 4xx naming the field: NUL in table names, options and ids; a
 *   cursor above the bigint maximum; malformed `%`-escapes in every path parameter; NUL, a lone
 *   surrogate or deep nesting in a run or plan request's request, context or memory;
 * - a fuzz generated from the document itself: every operation, its path parameters, query
 *   parameters and request body (schema-guided values, hostile leaves), asserting 0 responses ≥ 500.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ERROR_CODES } from "../src/kernel/errors.js";
import { openApiDocument } from "../src/api/openapi.js";
import { PgTableStore } from "../skills/qtable/pg-store.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, newKey, serveApi, type ApiUnderTest, type Reply } from "./helpers/api.js";
import { approvalSkill, EffectLedger } from "./helpers/skills.js";

type Op = {
  path: string;
  method: string;
  op: {
    parameters?: { name: string; in: string }[];
    requestBody?: { content: Record<string, { schema: { $ref?: string } }> };
  };
};
const doc = openApiDocument() as {
  paths: Record<string, Record<string, Op["op"]>>;
  components: { schemas: Record<string, JsonSchema> };
};
const OPS: Op[] = Object.entries(doc.paths).flatMap(([path, item]) =>
  Object.entries(item).map(([method, op]) => ({ path, method: method.toUpperCase(), op })),
);
const pathParams = (path: string) => [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
const MALFORMED = ["%", "%Z", "%ZZ", "abc%", "%E0%A4%A", "%ED%A0%80", "%C0%80", "%FF"];
const codes = new Set<string>(ERROR_CODES);

let api: ApiUnderTest;
let close: () => Promise<void>;
let key: string;
let runId: string;
let tableId: string;

beforeAll(async () => {
  const o = await postgresBackend.open({ skills: [approvalSkill(new EffectLedger())] });
  // per-address limiting off: the fuzz sends more than 1,200 requests a minute from one address
  api = await serveApi(o.runtime, o.db, { tables: new PgTableStore(o.db!), limits: { requestsPerMinutePerIp: 0 } });
  close = async () => {
    await api.close();
    await o.close();
  };
  key = await newKey(api.access, "hostile");
  const run = await call(api.url, "POST", "/api/tool-chains/run", {
    key,
    body: { plan: { steps: [{ stepId: "pub", skillName: "test.publish", arguments: { title: "t" } }] } },
  });
  expect(run.body.status).toBe("waiting_confirmation");
  runId = run.body.runId;
  tableId = (await call(api.url, "GET", "/api/tables", { key })).body.tables[0].id;
}, 120_000);
afterAll(() => close?.());

/** A 4xx with the API's error body and a stable code (or, for /mcp, a JSON-RPC error). */
function expectStable(r: Reply, what: string): void {
  expect(r.status, `${what}: ${r.text.slice(0, 300)}`).toBeLessThan(500);
  if (r.status >= 400 && !what.includes("/mcp"))
    expect(codes.has(r.body?.error?.code), `${what}: ${r.text.slice(0, 300)}`).toBe(true);
}

const deep = (n: number) => {
  let v: unknown = 1;
  for (let i = 0; i < n; i++) v = i % 2 ? [v] : { d: v };
  return v;
};

describe(`hostile input on every route (${postgresBackend.name})`, () => {
  test("a malformed %-escape in any path parameter: 400 INVALID_PATH naming the parameter", async () => {
    const withParams = OPS.filter((o) => pathParams(o.path).length);
    expect(withParams.length).toBeGreaterThanOrEqual(6);
    for (const { path, method } of withParams) {
      for (const name of pathParams(path)) {
        for (const bad of MALFORMED) {
          const url = path.replace(/\{(\w+)\}/g, (_, p: string) =>
            p === name ? bad : p === "runId" ? runId : tableId,
          );
          const r = await call(api.url, method, url, { key, ...(method === "POST" ? { body: {} } : {}) });
          expect([r.status, r.body?.error?.code], `${method} ${url}: ${r.text}`).toEqual([400, "INVALID_PATH"]);
          expect(r.body.error.message).toContain(`path parameter ${name}`);
        }
      }
    }
  });

  test("NUL in table names, options and ids; a cursor above the bigint maximum: 4xx naming the field", async () => {
    const post = (body: unknown) => call(api.url, "POST", "/api/tables", { key, body });
    const bad = async (r: Reply, status: number, code: string, field: string) => {
      expect([r.status, r.body?.error?.code], r.text).toEqual([status, code]);
      expect(r.body.error.message).toContain(field);
    };
    await bad(
      await post({ name: "a\u0000b", fields: [{ name: "x", type: "text" }] }),
      400,
      "INVALID_BODY",
      "body.name",
    );
    await bad(
      await post({ name: "lone \ud800", fields: [{ name: "x", type: "text" }] }),
      400,
      "INVALID_BODY",
      "body.name",
    );
    await bad(
      await post({ name: "S", fields: [{ name: "s", type: "select", options: ["ok", "n\u0000"] }] }),
      400,
      "INVALID_BODY",
      "body.fields.0.options.1",
    );
    await bad(
      await post({ name: "R", fields: [{ name: "r", type: "relation", tableId: "t\u0000" }] }),
      400,
      "INVALID_BODY",
      "body.fields.0.tableId",
    );
    for (const p of ["/api/tables/a%00b", "/api/tables/a%00b/records", `/api/tables/${"x".repeat(300)}`])
      await bad(await call(api.url, "GET", p, { key }), 404, "TABLE_NOT_FOUND", "tableId");
    for (const c of ["9223372036854775808", "99999999999999999999", "%00", "-1"]) {
      await bad(await call(api.url, "GET", `/api/tables?cursor=${c}`, { key }), 400, "INVALID_QUERY", "query.cursor");
      await bad(
        await call(api.url, "GET", `/api/tables/${tableId}/records?cursor=${c}`, { key }),
        400,
        "INVALID_QUERY",
        "query.cursor",
      );
    }
    await bad(await call(api.url, "GET", "/api/tables?limit=101", { key }), 400, "INVALID_QUERY", "query.limit");
  });

  test("NUL, a lone surrogate or deep nesting in a run or plan request's request, context or memory: 400 naming the field", async () => {
    const cases: [string, Record<string, unknown>, string][] = [
      ["request", { request: "plan a\u0000 thing" }, "request"],
      ["request", { request: "plan \udc00 thing" }, "request"],
      ["context", { request: "plan a thing", context: { a: "x\u0000" } }, "context.a"],
      ["context", { request: "plan a thing", context: { a: "\ud83d" } }, "context.a"],
      ["context", { request: "plan a thing", context: deep(100) }, "context.0.d"],
      ["memory", { request: "plan a thing", memory: { m: "\u0000" } }, "memory.m"],
      ["memory", { request: "plan a thing", memory: { m: deep(100) } }, "memory.m"],
      ["memory", { request: "plan a thing", memory: { ["k\u0000"]: 1 } }, "memory"],
    ];
    for (const [what, body, field] of cases) {
      for (const [path, extra] of [
        ["/api/tool-chains/plan", {}],
        ["/api/tool-chains/run", { autoPlan: true }],
        ["/api/tool-chains/stream", { autoPlan: true }],
      ] as const) {
        const r = await call(api.url, "POST", path, { key, body: { ...body, ...extra } });
        expect([r.status, r.body?.error?.code], `${what} ${path}: ${r.text.slice(0, 300)}`).toEqual([
          400,
          "UNSUPPORTED_VALUE",
        ]);
        expect(r.body.error.details.field, `${what} ${path}`).toContain(field);
      }
    }
  });

  // ---- the fuzz, generated from the OpenAPI document ------------------------------------------

  const short = fc.oneof(
    fc.constantFrom(
      "\u0000",
      "a\u0000b",
      "\ud800",
      "x\udfffy",
      "😀",
      "",
      "%",
      "%ZZ",
      "%00",
      "%ED%A0%80",
      "__proto__",
      "constructor",
      "9223372036854775808",
      "-1",
      "1e309",
      "../..",
      "approve",
    ),
    fc.string({ unit: "binary", maxLength: 12 }),
  );
  const nasty = fc.oneof({ arbitrary: short, weight: 19 }, { arbitrary: fc.constant("x".repeat(30_000)), weight: 1 });
  const num = fc.oneof(
    fc.constantFrom(1.7976931348623157e308, -5e-324, 2 ** 53 + 2, -0, 0, 1),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
  );
  const deepArb = fc.integer({ min: 1, max: 120 }).map(deep);
  const { value: hostile } = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: "small" },
      nasty,
      num,
      fc.boolean(),
      fc.constant(null),
      deepArb,
      fc.array(tie("value"), { maxLength: 3 }),
      fc.dictionary(nasty, tie("value"), { maxKeys: 3 }),
    ),
  }));

  /** Values shaped like the schema (so they get past the first checks), with hostile leaves. */
  function shaped(s: JsonSchema | undefined, depth = 0): fc.Arbitrary<unknown> {
    if (!s || depth > 6) return hostile;
    if (s.$ref) return shaped(doc.components.schemas[s.$ref.split("/").pop()!], depth + 1);
    const alts = s.anyOf ?? s.oneOf;
    if (alts) return fc.oneof(...alts.map((a) => shaped(a, depth + 1)));
    const typed: fc.Arbitrary<unknown> = (() => {
      if (s.enum) return fc.constantFrom(...s.enum);
      if (s.const !== undefined) return fc.constant(s.const);
      switch (s.type) {
        case "string":
          return nasty;
        case "integer":
        case "number":
          return num;
        case "boolean":
          return fc.boolean();
        case "array":
          return fc.array(shaped(s.items, depth + 1), { maxLength: 3 });
        case "object":
          if (!s.properties) return fc.dictionary(nasty, hostile, { maxKeys: 3 });
          return fc.record(
            Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, shaped(v, depth + 1)])),
            { requiredKeys: [] },
          );
        default:
          return hostile;
      }
    })();
    return fc.oneof({ arbitrary: typed, weight: 5 }, { arbitrary: hostile, weight: 1 });
  }

  const mcpBody = fc.oneof(
    fc.record(
      {
        jsonrpc: fc.constantFrom("2.0", "1.0", "\u0000"),
        id: fc.oneof(fc.integer(), nasty, fc.constant(null)),
        method: fc.oneof(
          fc.constantFrom(
            "initialize",
            "tools/list",
            "tools/call",
            "ping",
            "notifications/initialized",
            "resources/read",
          ),
          nasty,
        ),
        params: hostile,
      },
      { requiredKeys: ["method"] },
    ),
    fc.array(
      fc.record({
        jsonrpc: fc.constant("2.0"),
        id: fc.integer(),
        method: fc.constantFrom("tools/call", "initialize"),
        params: hostile,
      }),
      { maxLength: 3 },
    ),
    hostile,
  );

  const idValue = (name: string) =>
    fc.oneof(
      fc.constant(name === "runId" ? runId : tableId),
      fc.constantFrom(...MALFORMED),
      short.map((x) => encodeURIComponent(x.replace(/[\ud800-\udfff]/g, "?"))),
      fc.constantFrom("Tasks", "%00", "x".repeat(250)),
    );

  test.each(OPS.map((o) => [`${o.method} ${o.path}`, o] as const))(
    "fuzz %s: 0 responses ≥ 500",
    async (what, { path, method, op }) => {
      const query = (op.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name);
      const headers = (op.parameters ?? []).filter((p) => p.in === "header").map((p) => p.name);
      const bodyRef = op.requestBody?.content["application/json"]?.schema;
      const isMcp = path === "/mcp";
      const arb = fc.record({
        params: fc.record(Object.fromEntries(pathParams(path).map((n) => [n, idValue(n)]))),
        query: fc.record(
          Object.fromEntries(
            [...query, "cursor"].map((n) => [
              n,
              fc.oneof(short, fc.integer().map(String), fc.bigInt({ min: 0n, max: 10n ** 25n }).map(String)),
            ]),
          ),
          { requiredKeys: [] },
        ),
        headers: fc.record(
          Object.fromEntries(
            [...headers, ...(isMcp ? ["mcp-session-id", "mcp-protocol-version"] : [])].map((n) => [
              n,
              short.map((s) => s.replace(/[^\x20-\x7e]/g, "?")),
            ]),
          ),
          { requiredKeys: [] },
        ),
        body: isMcp ? mcpBody : bodyRef ? shaped(bodyRef as JsonSchema) : fc.constant(undefined),
      });
      let n = 0;
      await fc.assert(
        fc.asyncProperty(arb, async ({ params, query: q, headers: h, body }) => {
          const url = path.replace(/\{(\w+)\}/g, (_, p: string) => String((params as Record<string, string>)[p]));
          const qs = new URLSearchParams(q as Record<string, string>).toString();
          const raw = body === undefined || method === "GET" ? undefined : JSON.stringify(body);
          const r = await call(api.url, method, `${url}${qs ? `?${qs}` : ""}`, {
            key,
            ...(raw !== undefined ? { raw } : {}),
            headers: {
              ...(h as Record<string, string>),
              ...(raw !== undefined ? { "content-type": "application/json" } : {}),
              ...(isMcp ? { accept: "application/json, text/event-stream" } : {}),
            },
            signal: AbortSignal.timeout(20_000),
          });
          n++;
          expectStable(r, `${method} ${url}`);
        }),
        { numRuns: isMcp || bodyRef ? 40 : 25, seed: 20261221, endOnFailure: true },
      );
      expect(n).toBeGreaterThan(0);
    },
    300_000,
  );
});

interface JsonSchema {
  $ref?: string;
  type?: string;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
}
