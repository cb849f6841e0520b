/**
 * The durable core as an API user meets it: an API-only process (runs queued) and a worker
 * process on one Postgres (embedded, or the server at DATABASE_URL), real HTTP.
 * - issue 8.3: unstorable input answers 400 naming the field, and nothing moves;
 * - issue 8.6: cancelling a queued run answers 200 `cancelled` and nothing executes;
 * - issue 16.1: poison runs from workspace A do not hold workspace B's runs back, and end `failed`;
 * - hostile values (issue 8): property fuzzing of run / confirm / cancel bodies, list queries and
 *   skill outputs: a 4xx with a stable code or stored losslessly; never a 5xx or a stuck run.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { z } from "zod";
import { RunViewSchema } from "../src/api/schemas.js";
import { defineSkill } from "../src/skills/contract.js";
import type { Runtime } from "../src/runtime/runtime.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, newKey, serveApi, until, type ApiUnderTest } from "./helpers/api.js";
import { approvalSkill, EffectLedger, effectSkill } from "./helpers/skills.js";
import { poisonSkill } from "./helpers/hostile-skills.js";

const ledger = new EffectLedger();
const poisonCalls = { n: 0 };
/** Outputs the fuzzed skill returns, by key (set by the test before each run). */
const outputs = new Map<string, unknown>();
const fuzzOutput = defineSkill({
  name: "test.fuzz_output",
  description: "returns the output the test prepared under `key`",
  input: z.object({ key: z.string() }),
  sideEffects: "none",
  idempotent: true,
  async execute(a) {
    return outputs.get(a.key);
  },
});
const skills = () => [approvalSkill(ledger), effectSkill(ledger), poisonSkill(poisonCalls), fuzzOutput];

let api: ApiUnderTest;
let a: Runtime;
let b: Runtime;
let close: () => Promise<void>;
let stopWorker: () => Promise<void>;
let keyA: string;
let keyB: string;

beforeAll(async () => {
  const pair = await postgresBackend.openPair({
    skills: skills(),
    driveRetry: { maxFailures: 3, initialMs: 200, maxMs: 400 },
    decisionPollMs: 50,
  });
  ({ a, b } = pair);
  close = pair.close;
  // a: the API-only process; b: the worker (few runs at a time, so a backlog would show)
  api = await serveApi(a, pair.db, { execution: "queue" });
  stopWorker = b.startWorker({ pollMs: 50, maxActive: 4 });
  keyA = await newKey(api.access, "ws-a");
  keyB = await newKey(api.access, "ws-b");
}, 120_000);
afterAll(async () => {
  await stopWorker?.();
  await api?.close();
  await close?.();
});

const RUN = "/api/tool-chains/run";
const acceptable400 = new Set([
  "UNSUPPORTED_VALUE",
  "INVALID_BODY",
  "INVALID_JSON",
  "PLAN_INVALID",
  "INVALID_ARGUMENTS",
  "INVALID_DECISION",
  "INVALID_QUERY",
  "PAYLOAD_TOO_LARGE",
  "RESERVED_ID",
]);
const jsonRoundTrip = (v: unknown) => JSON.parse(JSON.stringify(v)) as unknown;

async function waitingRun(key: string): Promise<string> {
  const r = await call(api.url, "POST", RUN, {
    key,
    body: { plan: { steps: [{ stepId: "pub", skillName: "test.publish", arguments: { title: "t" } }] } },
  });
  expect([r.status, r.body.status]).toEqual([200, "waiting_confirmation"]);
  return r.body.runId;
}
async function settledRow(runId: string) {
  await until(async () => {
    const row = await a.store.getRow(runId);
    return (
      !!row &&
      !row.leaseOwner &&
      ["completed", "failed", "cancelled", "rolled_back", "rollback_failed", "waiting_confirmation"].includes(
        row.status,
      )
    );
  }, 30_000);
  return (await a.store.getRow(runId))!;
}

describe(`durable core over HTTP (${postgresBackend.name})`, () => {
  test("8.3 NUL in a plan, context, memory, confirm or cancel body: 400 naming the field; the run does not move", async () => {
    const plan = { steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: "x\u0000" } }] };
    let r = await call(api.url, "POST", RUN, { key: keyA, body: { plan } });
    expect([r.status, r.body.error.code, r.body.error.details.field]).toEqual([
      400,
      "UNSUPPORTED_VALUE",
      "plan.steps.0.arguments.value",
    ]);
    r = await call(api.url, "POST", RUN, {
      key: keyA,
      body: { plan: { steps: [{ stepId: "a", skillName: "core.pass" }] }, context: { t: "\u0000" } },
    });
    expect([r.status, r.body.error.code, r.body.error.message]).toEqual([
      400,
      "UNSUPPORTED_VALUE",
      expect.stringContaining("context.t"),
    ]);
    r = await call(api.url, "POST", RUN, {
      key: keyA,
      body: { plan: { steps: [{ stepId: "a", skillName: "core.pass" }] }, memory: { m: "\ud800" } },
    });
    expect([r.status, r.body.error.code]).toEqual([400, "UNSUPPORTED_VALUE"]);

    const runId = await waitingRun(keyA);
    const path = `/api/tool-chains/runs/${runId}`;
    for (const body of [
      { stepId: "pub", decision: "approve", comment: "\u0000" },
      { stepId: "pub", decision: "approve", arguments: { title: "\u0000" } },
      { stepId: "pub\u0000", decision: "approve" },
    ]) {
      r = await call(api.url, "POST", `${path}/confirm`, { key: keyA, body });
      expect([r.status, r.body.error.code], JSON.stringify(body)).toEqual([400, "UNSUPPORTED_VALUE"]);
    }
    r = await call(api.url, "POST", `${path}/cancel`, { key: keyA, body: { reason: "stop\u0000" } });
    expect([r.status, r.body.error.code, r.body.error.details.field]).toEqual([400, "UNSUPPORTED_VALUE", "reason"]);
    expect((await call(api.url, "GET", "/api/tool-chains/runs/%00", { key: keyA })).status).toBe(404);
    // nothing moved: the row and GET agree that it waits; a clean confirm still works
    expect((await a.store.getRow(runId))!.status).toBe("waiting_confirmation");
    expect((await call(api.url, "GET", path, { key: keyA })).body.status).toBe("waiting_confirmation");
    r = await call(api.url, "POST", `${path}/confirm`, { key: keyA, body: { stepId: "pub", decision: "approve" } });
    expect([r.status, r.body.status]).toEqual([200, "completed"]);
  });

  test("8.6 cancelling a queued run answers 200 cancelled; nothing executes", async () => {
    await stopWorker(); // keep it queued
    try {
      const before = ledger.total();
      const r = await call(api.url, "POST", RUN, {
        key: keyA,
        body: { plan: { steps: [{ stepId: "w", skillName: "test.effect", arguments: { label: "q" } }] }, wait: false },
      });
      expect([r.status, r.body.status]).toEqual([202, "queued"]);
      // a view read from the store (no checkpoint yet) has the contract's every field
      RunViewSchema.parse(r.body);
      RunViewSchema.parse((await call(api.url, "GET", `/api/tool-chains/runs/${r.body.runId}`, { key: keyA })).body);
      const c = await call(api.url, "POST", `/api/tool-chains/runs/${r.body.runId}/cancel`, {
        key: keyA,
        body: { reason: "not needed" },
      });
      expect([c.status, c.body.status, c.body.steps[0].status]).toEqual([200, "cancelled", "cancelled"]);
      expect((await settledRow(r.body.runId)).status).toBe("cancelled");
      expect(ledger.total()).toBe(before);
    } finally {
      stopWorker = b.startWorker({ pollMs: 50, maxActive: 4 });
    }
  });

  test("16.1 poison runs from workspace A: B's runs complete promptly; A's end failed after bounded re-drives", async () => {
    // reserved ids are refused up front
    for (const stepId of ["constructor", "toString", "valueOf", "hasOwnProperty"]) {
      const r = await call(api.url, "POST", RUN, {
        key: keyA,
        body: { plan: { steps: [{ stepId, skillName: "core.pass" }] } },
      });
      expect([r.status, r.body.error.code]).toEqual([400, "RESERVED_ID"]);
    }
    // poison that passes validation: every drive throws (a skill's serialKey hook)
    const poison: string[] = [];
    for (let i = 0; i < 12; i++) {
      const r = await call(api.url, "POST", RUN, {
        key: keyA,
        body: { plan: { steps: [{ stepId: "p", skillName: "test.poison", arguments: { n: i } }] }, wait: false },
      });
      expect(r.status).toBe(202);
      poison.push(r.body.runId);
    }
    await until(() => poisonCalls.n >= 4, 30_000); // the worker is busy with them
    const t0 = Date.now();
    const replies = await Promise.all(
      [1, 2, 3].map((i) =>
        call(api.url, "POST", RUN, {
          key: keyB,
          body: { plan: { steps: [{ stepId: "b", skillName: "core.pass", arguments: { value: i } }] } },
        }),
      ),
    );
    expect(replies.map((r) => [r.status, r.body.status])).toEqual([
      [200, "completed"],
      [200, "completed"],
      [200, "completed"],
    ]);
    const bTook = Date.now() - t0;
    // every poison run ends failed with its error, after exactly maxFailures drives, and stays so
    for (const id of poison) {
      const row = await settledRow(id);
      expect([row.status, row.error?.code, row.driveFailures]).toEqual(["failed", "DRIVE_FAILED", 3]);
      const v = await call(api.url, "GET", `/api/tool-chains/runs/${id}`, { key: keyA });
      expect([v.status, v.body.status, v.body.error.code]).toEqual([200, "failed", "DRIVE_FAILED"]);
      expect(v.body.error.message).toContain("serialKey exploded");
    }
    const n = poisonCalls.n;
    expect(n).toBe(12 * 3);
    await new Promise((r) => setTimeout(r, 500));
    expect(poisonCalls.n).toBe(n); // no re-drive loop
    console.log(JSON.stringify({ poisonRuns: poison.length, drivesEach: 3, workspaceBRunsMs: bTook }));
  }, 120_000);

  // ---- hostile values -------------------------------------------------------------------------

  const short = fc.oneof(
    fc.constantFrom(
      "\u0000",
      "a\u0000b",
      "\ud800",
      "x\udfffy",
      "\udbff\udfff",
      "😀",
      "é",
      "",
      "\\u0000",
      "__proto__",
      "constructor",
      "%00",
      "12345678901234567890",
    ),
    fc.string({ unit: "binary", maxLength: 12 }),
  );
  const nasty = fc.oneof({ arbitrary: short, weight: 19 }, { arbitrary: fc.constant("x".repeat(100_000)), weight: 1 });
  const num = fc.oneof(
    fc.constantFrom(1.7976931348623157e308, -5e-324, 2 ** 53 + 2, 12345678901234567890, -0),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
  );
  const deep = fc.integer({ min: 1, max: 120 }).map((d) => {
    let v: unknown = 1;
    for (let i = 0; i < d; i++) v = i % 2 ? [v] : { d: v };
    return v;
  });
  const { value: hostileValue } = fc.letrec<{ value: unknown }>((tie) => ({
    value: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      nasty,
      num,
      fc.boolean(),
      fc.constant(null),
      deep,
      fc.array(tie("value"), { maxLength: 3 }),
      fc.dictionary(nasty, tie("value"), { maxKeys: 3 }),
    ),
  }));
  const params = { numRuns: 25, seed: 20261201, endOnFailure: true };

  test("fuzz: run bodies answer 200 stored losslessly, or 400 with a stable code; never 5xx", async () => {
    await fc.assert(
      fc.asyncProperty(hostileValue, hostileValue, hostileValue, async (arg, context, mem) => {
        const body = {
          plan: { steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: { $literal: arg } } }] },
          context,
          memory: { m: mem },
        };
        const raw = JSON.stringify(body);
        if (raw.length > 1_000_000) return; // beyond the body limit: 413 is covered elsewhere
        const r = await call(api.url, "POST", RUN, { key: keyB, raw, headers: { "content-type": "application/json" } });
        expect(r.status, r.text.slice(0, 300)).toBeLessThan(500);
        if (r.status === 400) return void expect(acceptable400.has(r.body.error.code), r.text.slice(0, 300)).toBe(true);
        expect([r.status, r.body.status]).toEqual([200, "completed"]);
        const view = (await call(api.url, "GET", `/api/tool-chains/runs/${r.body.runId}`, { key: keyB })).body;
        expect(view.steps[0].output).toEqual(jsonRoundTrip(arg));
        const sent = context === null ? {} : jsonRoundTrip(context); // a null context is the empty context
        expect(view.context).toEqual(sent);
        const row = await settledRow(r.body.runId);
        expect(row.status).toBe("completed");
        expect(row.context).toEqual(sent);
      }),
      params,
    );
  }, 300_000);

  test("fuzz: skill outputs are stored losslessly or fail the step with UNSUPPORTED_VALUE; the run always settles", async () => {
    let i = 0;
    await fc.assert(
      fc.asyncProperty(fc.oneof(hostileValue, fc.constantFrom<unknown>(10n, Number.NaN, Infinity)), async (out) => {
        const key = `o${i++}`;
        outputs.set(key, out);
        const r = await call(api.url, "POST", RUN, {
          key: keyB,
          body: { plan: { steps: [{ stepId: "s", skillName: "test.fuzz_output", arguments: { key } }] } },
        });
        expect(r.status, r.text.slice(0, 300)).toBe(200);
        const row = await settledRow(r.body.runId);
        const view = (await call(api.url, "GET", `/api/tool-chains/runs/${r.body.runId}`, { key: keyB })).body;
        if (view.status === "completed") {
          expect(view.steps[0].output).toEqual(out === undefined ? null : jsonRoundTrip(out));
          expect((await a.store.getView(r.body.runId))!.steps[0]!.output).toEqual(view.steps[0].output);
        } else {
          expect([view.status, view.steps[0].error.code]).toEqual(["failed", "UNSUPPORTED_VALUE"]);
        }
        expect(row.status).toBe(view.status);
      }),
      params,
    );
  }, 300_000);

  test("fuzz: confirm and cancel bodies and list queries answer 4xx or apply; a refused request moves nothing", async () => {
    const runId = await waitingRun(keyB);
    const path = `/api/tool-chains/runs/${runId}`;
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          stepId: fc.oneof(nasty, fc.constant("ghost")),
          decision: fc.constantFrom("approve", "reject", "mark_done", "skip", "\u0000"),
          comment: fc.option(nasty, { nil: undefined }),
          arguments: fc.option(fc.dictionary(nasty, hostileValue, { maxKeys: 2 }), { nil: undefined }),
          output: fc.option(hostileValue, { nil: undefined }),
        }),
        async (body) => {
          const r = await call(api.url, "POST", `${path}/confirm`, { key: keyB, body });
          expect(r.status, r.text.slice(0, 300)).toBeGreaterThanOrEqual(400);
          expect(r.status, r.text.slice(0, 300)).toBeLessThan(500);
        },
      ),
      params,
    );
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          status: fc.option(short, { nil: undefined }),
          limit: fc.option(fc.oneof(short, fc.integer().map(String)), { nil: undefined }),
          cursor: fc.option(
            fc.oneof(
              short,
              fc
                .bigInt({ min: 0n, max: 10n ** 25n })
                .map((n) => Buffer.from(JSON.stringify([String(n), "r\u0000"])).toString("base64url")),
            ),
            { nil: undefined },
          ),
        }),
        async (q) => {
          const qs = new URLSearchParams(
            Object.entries(q).filter(([, v]) => v !== undefined) as [string, string][],
          ).toString();
          const r = await call(api.url, "GET", `/api/tool-chains/runs?${qs}`, { key: keyB });
          expect(r.status, r.text.slice(0, 300)).toBeLessThan(500);
          if (r.status !== 200) expect(r.body.error.code).toBe("INVALID_QUERY");
        },
      ),
      params,
    );
    // after all of that, the run still waits, in the row and in the view
    expect((await a.store.getRow(runId))!.status).toBe("waiting_confirmation");
    expect((await call(api.url, "GET", path, { key: keyB })).body.status).toBe("waiting_confirmation");
    // cancel reasons: refused (400) or applied once
    await fc.assert(
      fc.asyncProperty(nasty, async (reason) => {
        const id = await waitingRun(keyB);
        const r = await call(api.url, "POST", `/api/tool-chains/runs/${id}/cancel`, { key: keyB, body: { reason } });
        expect(r.status, r.text.slice(0, 300)).toBeLessThan(500);
        const row = await settledRow(id);
        if (r.status === 400) {
          expect(acceptable400.has(r.body.error.code)).toBe(true);
          expect(row.status).toBe("waiting_confirmation");
        } else {
          expect([r.status, r.body.status, row.status]).toEqual([200, "cancelled", "cancelled"]);
          if (reason) expect(r.body.error.message).toBe(reason);
        }
      }),
      { ...params, numRuns: 12 },
    );
  }, 300_000);
});
