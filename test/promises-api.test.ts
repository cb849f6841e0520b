/**
 * README promises of the HTTP API that had no test, over real HTTP on a real database:
 * TOOLCHAIN_MAX_WAIT_MS answering 202, /readyz 503 when the database is down, a revoked key
 * stopping within the auth cache time, rate limit 0 = off, metrics changing by exact amounts.
 * (Keys stored only as hashes: test/promises-cli.test.ts reads the table.)
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { TERMINAL_RUN } from "../src/kernel/status.js";
import { configFromEnv, startServer } from "../src/server/serve.js";
import type { Runtime } from "../src/runtime/runtime.js";
import type { Database } from "../src/store/db.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, newKey, serveApi } from "./helpers/api.js";
import { privatePostgresAvailable, startPrivatePostgres } from "./helpers/private-postgres.js";
import { Gates, gateSkill } from "./helpers/skills.js";
import { waitFor } from "./helpers/wait.js";

describe(`API promises (${postgresBackend.name})`, () => {
  const gates = new Gates();
  let runtime: Runtime;
  let db: Database | undefined;
  let close: () => Promise<void>;
  beforeAll(async () => {
    const o = await postgresBackend.open({ skills: [gateSkill(gates, new Map())] });
    runtime = o.runtime;
    db = o.db;
    close = o.close;
  }, 180_000);
  afterAll(async () => {
    gates.open("slow");
    await close?.();
  });

  test("a request waiting longer than maxWaitMs (TOOLCHAIN_MAX_WAIT_MS) answers 202 with the current view", async () => {
    const api = await serveApi(runtime, db, { limits: { maxWaitMs: 200 } });
    try {
      const key = await newKey(api.access, "ws-wait");
      const r = await call(api.url, "POST", "/api/tool-chains/run", {
        key,
        body: { plan: { steps: [{ stepId: "s", skillName: "test.gate", arguments: { gate: "slow" } }] } },
      });
      expect(r.status).toBe(202);
      expect(r.headers.get("location")).toBe(`/api/tool-chains/runs/${r.body.runId}`);
      expect(TERMINAL_RUN.has(r.body.status)).toBe(false); // the current view: queued, planning or running
      expect(r.body.result).toBeNull();
      gates.open("slow");
      await waitFor(
        async () =>
          (await call(api.url, "GET", `/api/tool-chains/runs/${r.body.runId}`, { key })).body.status === "completed",
        { what: "the run completed after the 202" },
      );
    } finally {
      await api.close();
    }
  });

  test("rate limit 0 turns the limit off (it does not mean 'nothing allowed')", async () => {
    const api = await serveApi(runtime, db, { limits: { requestsPerMinute: 0 } });
    try {
      const key = await newKey(api.access, "ws-nolimit");
      const statuses = await Promise.all(
        Array.from({ length: 30 }, () => call(api.url, "GET", "/api/skills", { key }).then((r) => r.status)),
      );
      expect(statuses).toEqual(Array(30).fill(200));
    } finally {
      await api.close();
    }
  });

  test("a key revoked elsewhere keeps working from the cache, and stops within the cache time", async () => {
    const { cachedAuthenticator } = await import("../src/api/auth.js");
    const first = await serveApi(runtime, db);
    // a second API process: its own authenticator with a 1 s cache, the same key store
    const cacheMs = 1_000;
    const second = await serveApi(runtime, db, {
      access: first.access,
      auth: cachedAuthenticator(first.access, cacheMs),
    });
    try {
      const key = await newKey(first.access, "ws-revoke");
      expect((await call(second.url, "GET", "/api/skills", { key })).status).toBe(200); // now cached in the second process
      const [info] = await first.access.listKeys("ws-revoke");
      expect(await first.access.revokeKey(info!.keyId)).toBe(true);
      expect((await call(first.url, "GET", "/api/skills", { key })).status).toBe(401); // at once where there is no cache
      const revokedAt = Date.now();
      const r = await waitFor(
        async () => {
          const x = await call(second.url, "GET", "/api/skills", { key });
          return x.status === 401 ? x : undefined;
        },
        { timeoutMs: cacheMs + 10_000, what: "the revoked key refused by the caching process" },
      );
      expect(r.body.error).toEqual({ code: "UNAUTHORIZED", message: "unknown or revoked API key" });
      // it could not have been refused before its cache entry expired... but it was refused after it
      expect(Date.now() - revokedAt).toBeLessThan(cacheMs + 10_000);
    } finally {
      await second.close();
      await first.close();
    }
  });

  test("metrics change by exact amounts", async () => {
    const api = await serveApi(runtime, db);
    try {
      const key = await newKey(api.access, "ws-metrics");
      const metric = async (re: RegExp) => Number(re.exec((await call(api.url, "GET", "/metrics")).text)?.[1] ?? 0);
      const completed = /^toolchain_runs_finished_total\{status="completed"\} (\d+)/m;
      const failed = /^toolchain_runs_finished_total\{status="failed"\} (\d+)/m;
      const retries = /^toolchain_step_retries_total\{skill="core.fail"\} (\d+)/m;
      const stepsOk = /^toolchain_step_duration_seconds_count\{skill="core.pass",outcome="completed"\} (\d+)/m;
      const posts =
        /^toolchain_http_request_duration_seconds_count\{method="POST",route="\/api\/tool-chains\/run",status="200"\} (\d+)/m;
      const before = await Promise.all([completed, failed, retries, stepsOk, posts].map(metric));
      const ok = {
        steps: [
          { stepId: "a", skillName: "core.pass", arguments: { value: 1 } },
          { stepId: "b", skillName: "core.pass", dependsOn: ["a"], arguments: { value: 2 } },
        ],
      };
      const bad = {
        steps: [
          { stepId: "f", skillName: "core.fail", retry: { maxAttempts: 3, backoff: { kind: "fixed", initialMs: 1 } } },
        ],
      };
      expect((await call(api.url, "POST", "/api/tool-chains/run", { key, body: { plan: ok } })).body.status).toBe(
        "completed",
      );
      expect((await call(api.url, "POST", "/api/tool-chains/run", { key, body: { plan: ok } })).body.status).toBe(
        "completed",
      );
      expect((await call(api.url, "POST", "/api/tool-chains/run", { key, body: { plan: bad } })).body.status).toBe(
        "failed",
      );
      const after = await Promise.all([completed, failed, retries, stepsOk, posts].map(metric));
      // 2 completed runs, 1 failed run, 2 retries (3 attempts), 4 completed core.pass steps, 3 POSTs answered 200
      expect(after.map((v, i) => v - before[i]!)).toEqual([2, 1, 2, 4, 3]);
    } finally {
      await api.close();
    }
  });
});

describe.runIf(privatePostgresAvailable)("readiness against a real database", () => {
  test("/readyz answers 503 NOT_READY while the database is down; /healthz stays 200", async () => {
    const pgsrv = startPrivatePostgres();
    let stopped = false;
    const srv = await startServer(
      configFromEnv({ DATABASE_URL: pgsrv.url, PORT: "0", TOOLCHAIN_DEV_KEY: "0", REDIS_URL: "" }),
      {},
      () => undefined,
    );
    try {
      expect((await call(srv.url, "GET", "/readyz")).status).toBe(200);
      pgsrv.stop();
      stopped = true;
      const r = await call(srv.url, "GET", "/readyz");
      expect([r.status, r.body.error.code]).toEqual([503, "NOT_READY"]);
      expect(r.body.error.message).toBe("database not reachable"); // the detail goes to the log only
      expect((await call(srv.url, "GET", "/healthz")).status).toBe(200);
    } finally {
      await srv.close().catch(() => undefined);
      if (!stopped) pgsrv.stop();
    }
  }, 120_000);
});
