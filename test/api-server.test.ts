/**
 * The server as deployed: startServer from configuration (dev workspace and key on first start,
 * configured keys, the keys CLI), API-only processes queueing runs for a worker, and the quick
 * start (`npm start` = `toolchain serve`) as a real child process.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { afterAll, describe, expect, test } from "vitest";
import { keysCommand } from "../src/cli/keys.js";
import { Runtime } from "../src/runtime/runtime.js";
import { configFromEnv, startServer, type RunningServer } from "../src/server/serve.js";
import { PgRunStore } from "../src/store/pg-run-store.js";
import { freshSchema, postgresBackend, serverUrl } from "./helpers/backends.js";
import { nodeArgs, seedDataDir } from "./helpers/prebuilt.js";
import { call, collectSse, TEST_REQUESTS_PER_MINUTE } from "./helpers/api.js";
import { waitFor } from "./helpers/wait.js";

const schemas: string[] = [];
/** A fresh schema on the server, or a fresh embedded database (on disk when it must outlive a restart). */
/** Storage for one server, and the test limit (tests poll faster than the default 600/min allows). */
function storageEnv(embedded: "disk" | "memory" = "disk"): Record<string, string> {
  const limit = { TOOLCHAIN_RATE_LIMIT_PER_MIN: String(TEST_REQUESTS_PER_MINUTE) };
  if (serverUrl) {
    const s = freshSchema("srv");
    schemas.push(s);
    return { ...limit, DATABASE_URL: serverUrl, TOOLCHAIN_SCHEMA: s };
  }
  return {
    ...limit,
    TOOLCHAIN_DATA_DIR:
      embedded === "memory"
        ? ":memory:"
        : seedDataDir(path.join(mkdtempSync(path.join(tmpdir(), "tc-srv-")), "pglite")),
  };
}
afterAll(async () => {
  if (!serverUrl || !schemas.length) return;
  const pool = new pg.Pool({ connectionString: serverUrl, max: 1 });
  for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
  await pool.end();
});

const plan = { steps: [{ stepId: "a", skillName: "core.wait", arguments: { ms: 1, value: "done" } }] };

describe(`the server process (${postgresBackend.name})`, () => {
  test("first start creates a local workspace and prints its key; later starts do not; keys are managed from the CLI", async () => {
    const env: Record<string, string> = {
      ...storageEnv(),
      PORT: "0",
      TOOLCHAIN_DEV_KEY: "1",
      TOOLCHAIN_AUTH_CACHE_MS: "0",
    };
    const logs: string[] = [];
    let srv: RunningServer = await startServer(configFromEnv(env), {}, (l) => logs.push(l));
    try {
      expect(srv.devKey).toMatch(/^tck_[A-Za-z0-9_-]{43}$/);
      expect(logs.join("\n")).toContain(srv.devKey!);
      if (!serverUrl)
        expect(readFileSync(path.join(path.dirname(env.TOOLCHAIN_DATA_DIR!), "local-api-key"), "utf8").trim()).toBe(
          srv.devKey,
        );
      const r = await call(srv.url, "POST", "/api/tool-chains/run", { key: srv.devKey, body: { plan } });
      expect([r.status, r.body.status]).toEqual([200, "completed"]);
      expect((await call(srv.url, "GET", "/readyz")).body).toEqual({ status: "ready" });
      const devKey = srv.devKey!;
      await srv.close();
      srv = await startServer(configFromEnv(env), {}, (l) => logs.push(l));
      expect(srv.devKey).toBeUndefined();
      expect((await call(srv.url, "GET", `/api/tool-chains/runs/${r.body.runId}`, { key: devKey })).body.status).toBe(
        "completed",
      );
      // keys create / list / revoke
      const out: string[] = [];
      expect(
        await keysCommand(
          srv.access,
          ["create", "--workspace", "team-a", "--skills", "core.pass", "--label", "ci"],
          (s) => out.push(s),
        ),
      ).toBe(0);
      const created = JSON.parse(out.pop()!);
      expect(created).toMatchObject({
        workspaceId: "team-a",
        allowedSkills: ["core.pass"],
        key: expect.stringMatching(/^tck_/),
      });
      const skills = await call(srv.url, "GET", "/api/skills", { key: created.key });
      expect(skills.body.skills.map((s: { name: string }) => s.name)).toEqual(["core.pass"]);
      expect(await keysCommand(srv.access, ["list", "--workspace", "team-a"], (s) => out.push(s))).toBe(0);
      const listed = JSON.parse(out.pop()!);
      expect(listed).toEqual([
        expect.objectContaining({ keyId: created.keyId, workspaceId: "team-a", label: "ci", revokedAt: null }),
      ]);
      expect(JSON.stringify(listed)).not.toContain(created.key);
      expect(await keysCommand(srv.access, ["revoke", created.keyId], (s) => out.push(s))).toBe(0);
      expect((await call(srv.url, "GET", "/api/skills", { key: created.key })).status).toBe(401);
      expect(await keysCommand(srv.access, ["revoke", created.keyId], (s) => out.push(s))).toBe(1);
    } finally {
      await srv.close();
    }
  });

  test("keys from configuration (TOOLCHAIN_API_KEYS) with a workspace allowlist", async () => {
    const key = "tck_configured-key-0123456789abcdefghijklmnop";
    const env = {
      ...storageEnv("memory"),
      PORT: "0",
      TOOLCHAIN_DEV_KEY: "0",
      TOOLCHAIN_API_KEYS: JSON.stringify([{ workspace: "ops", key, skills: ["core.*"] }]),
    };
    const srv = await startServer(configFromEnv(env), {}, () => undefined);
    try {
      expect(srv.devKey).toBeUndefined();
      const skills = await call(srv.url, "GET", "/api/skills", { key });
      expect(skills.body.skills.map((s: { name: string }) => s.name).sort()).toEqual([
        "core.fail",
        "core.pass",
        "core.wait",
      ]);
      expect(await srv.access.listKeys("ops")).toHaveLength(1);
    } finally {
      await srv.close();
    }
    expect(() => configFromEnv({ TOOLCHAIN_API_KEYS: '[{"workspace":"x","key":"short"}]' })).toThrow(
      /TOOLCHAIN_API_KEYS/,
    );
    for (const bad of ["0", "-1", "x", "1.5", "100001"])
      expect(() => configFromEnv({ TOOLCHAIN_WORKER_MAX_ACTIVE: bad })).toThrow(
        `Expected TOOLCHAIN_WORKER_MAX_ACTIVE to be an integer from`,
      );
    expect(configFromEnv({}).workerMaxActive).toBe(50);
    expect(configFromEnv({ TOOLCHAIN_WORKER_MAX_ACTIVE: "200" }).workerMaxActive).toBe(200);
  });

  test("an API-only process (TOOLCHAIN_ROLE=api) queues runs; a worker executes them; waiting and streaming still work", async () => {
    const env = { ...storageEnv("memory"), PORT: "0", TOOLCHAIN_ROLE: "api", TOOLCHAIN_DEV_KEY: "1" };
    const srv = await startServer(configFromEnv(env), {}, () => undefined);
    const { db } = srv.opened;
    // the worker: another runtime on the same database (in server mode it would be another process)
    const worker = new Runtime({
      checkpointer: new PostgresSaver(db.pool, undefined, { schema: db.schema }),
      store: new PgRunStore(db),
      owner: "worker-1",
    });
    const stop = worker.startWorker({ pollMs: 50 });
    try {
      const key = srv.devKey!;
      const waited = await call(srv.url, "POST", "/api/tool-chains/run", { key, body: { plan } });
      expect([waited.status, waited.body.status, waited.body.result.outputs.a]).toEqual([200, "completed", "done"]);
      expect(srv.opened.runtime.activeRuns()).toEqual([]);
      const queued = await call(srv.url, "POST", "/api/tool-chains/run", { key, body: { plan, wait: false } });
      expect(queued.status).toBe(202);
      // recorded as queued; the worker (polling every 50 ms) may have taken it already
      expect(["queued", "planning", "running", "completed"]).toContain(queued.body.status);
      expect(queued.body.createdAt).not.toMatch(/^1970/);
      const streamed = await collectSse(`${srv.url}/api/tool-chains/stream`, { key, method: "POST", body: { plan } });
      expect(streamed.at(-1)!.event).toBe("run_completed");
      expect(streamed.map((m) => Number(m.id))).toEqual(streamed.map((_, i) => i + 1));
      // the worker took the queued run too
      await waitFor(
        async () =>
          (await call(srv.url, "GET", `/api/tool-chains/runs/${queued.body.runId}`, { key })).body.status ===
          "completed",
        { what: "queued run completed" },
      );
    } finally {
      await stop();
      await worker.drain();
      await srv.close();
    }
  });

  test("quick start: `toolchain serve` prints its URL and key, serves, and stops on SIGTERM", async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      ...storageEnv(),
      PORT: "0",
      TOOLCHAIN_DEV_KEY: "1",
      REDIS_URL: "",
    };
    if (!serverUrl) env.DATABASE_URL = "";
    const child = spawn(process.execPath, [...nodeArgs("src/cli/main.ts"), "serve"], {
      env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let err = "";
    child.stderr.on("data", (d: Buffer) => (err += d.toString()));
    try {
      await waitFor(
        () => {
          if (child.exitCode !== null) throw new Error(`server exited: ${err}`);
          return /API key:\s+(tck_\S+)/.test(err);
        },
        { timeoutMs: 60_000, intervalMs: 50, what: "`toolchain serve` printing its key" },
      );
      const url = /toolchain API on (http:\/\/\S+)/.exec(err)![1]!;
      const key = /API key:\s+(tck_\S+)/.exec(err)![1]!;
      expect((await call(url, "POST", "/api/tool-chains/run", { key, body: { plan } })).body.status).toBe("completed");
      const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
      if (!serverUrl) expect(existsSync(path.join(path.dirname(env.TOOLCHAIN_DATA_DIR!), "local-api-key"))).toBe(true);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  }, 120_000);
});
