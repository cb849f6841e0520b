/**
 * The key lifecycle across restarts of the server process: the configuration is the truth for
 * configured keys (removed → revoked, moved → follows), keys created with `keys create` are left
 * alone, the dev key is minted only on the first start of an empty database and never printed
 * again, and the embedded data directory and key file are owner-only.
 */
import { mkdtempSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, describe, expect, test } from "vitest";
import { configFromEnv, startServer } from "../src/server/serve.js";
import { freshSchema, postgresBackend, serverUrl } from "./helpers/backends.js";
import { call } from "./helpers/api.js";

const schemas: string[] = [];
function storageEnv(): Record<string, string> {
  if (serverUrl) {
    const s = freshSchema("keys");
    schemas.push(s);
    return { DATABASE_URL: serverUrl, TOOLCHAIN_SCHEMA: s };
  }
  return { TOOLCHAIN_DATA_DIR: path.join(mkdtempSync(path.join(tmpdir(), "tc-keys-")), "pglite") };
}
afterAll(async () => {
  if (!serverUrl || !schemas.length) return;
  const pool = new pg.Pool({ connectionString: serverUrl, max: 1 });
  for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
  await pool.end();
});

const k1 = "tck_configured-one-0123456789abcdefghijklmn";
const k2 = "tck_configured-two-0123456789abcdefghijklmn";
const skillsOf = async (url: string, key: string) => {
  const r = await call(url, "GET", "/api/skills", { key });
  return r.status === 200 ? r.body.skills.map((s: { name: string }) => s.name).sort() : r.status;
};

describe(`key lifecycle across restarts (${postgresBackend.name})`, () => {
  test("configured keys follow the configuration; created keys are untouched", async () => {
    const base = { ...storageEnv(), PORT: "0", TOOLCHAIN_DEV_KEY: "0", TOOLCHAIN_AUTH_CACHE_MS: "0" };
    const start = (keys: unknown[], logs: string[] = []) =>
      startServer(configFromEnv({ ...base, TOOLCHAIN_API_KEYS: JSON.stringify(keys) }), {}, (l) => logs.push(l));
    let srv = await start([
      { workspace: "alpha", key: k1, skills: ["core.pass"] },
      { workspace: "beta", key: k2 },
    ]);
    let created: string;
    try {
      expect(await skillsOf(srv.url, k1)).toEqual(["core.pass"]);
      expect(await skillsOf(srv.url, k2)).toEqual([
        "core.fail",
        "core.pass",
        "core.wait",
        "qtable.gantt.generate",
        "qtable.notify.send",
        "qtable.table.schema.describe",
        "qtable.task.estimate",
        "qtable.task.records.create",
        "qtable.task.split",
      ]);
      await srv.access.ensureWorkspace("gamma");
      created = (await srv.access.createKey("gamma", { label: "cli" })).key;
    } finally {
      await srv.close();
    }
    // k2 removed, k1 moved to another workspace with another allowlist
    const logs: string[] = [];
    srv = await start([{ workspace: "delta", key: k1, skills: ["core.wait"] }], logs);
    try {
      expect(await skillsOf(srv.url, k2)).toBe(401);
      expect(await skillsOf(srv.url, k1)).toEqual(["core.wait"]);
      const run = await call(srv.url, "POST", "/api/tool-chains/run", {
        key: k1,
        body: { plan: { steps: [{ stepId: "a", skillName: "core.wait", arguments: { ms: 1 } }] } },
      });
      expect(run.status).toBe(200);
      expect((await srv.opened.runtime.store.getRow(run.body.runId))!.workspaceId).toBe("delta");
      expect(await skillsOf(srv.url, created)).toEqual([
        "core.fail",
        "core.pass",
        "core.wait",
        "qtable.gantt.generate",
        "qtable.notify.send",
        "qtable.table.schema.describe",
        "qtable.task.estimate",
        "qtable.task.records.create",
        "qtable.task.split",
      ]);
      expect(logs.join("\n")).toContain("revoked 1 configured API key(s)");
      expect((await srv.access.listKeys()).map((k) => [k.workspaceId, k.revokedAt === null])).toEqual(
        expect.arrayContaining([
          ["delta", true],
          ["beta", false],
          ["gamma", true],
        ]),
      );
    } finally {
      await srv.close();
    }
    // back in the configuration: active again
    srv = await start([
      { workspace: "delta", key: k1 },
      { workspace: "beta", key: k2 },
    ]);
    try {
      expect(await skillsOf(srv.url, k2)).toEqual([
        "core.fail",
        "core.pass",
        "core.wait",
        "qtable.gantt.generate",
        "qtable.notify.send",
        "qtable.table.schema.describe",
        "qtable.task.estimate",
        "qtable.task.records.create",
        "qtable.task.split",
      ]);
      expect(await skillsOf(srv.url, k1)).toEqual(["core.wait"]); // no skills given: allowlist unchanged
    } finally {
      await srv.close();
    }
  }, 240_000);

  test("the dev key is minted only on the first start of an empty database and never printed again", async () => {
    const env: Record<string, string> = {
      ...storageEnv(),
      PORT: "0",
      TOOLCHAIN_DEV_KEY: "1",
      TOOLCHAIN_AUTH_CACHE_MS: "0",
    };
    let logs: string[] = [];
    let srv = await startServer(configFromEnv(env), {}, (l) => logs.push(l));
    const devKey = srv.devKey!;
    try {
      expect(devKey).toMatch(/^tck_/);
      expect(logs.join("\n")).toContain(devKey);
      if (!serverUrl) {
        const dir = env.TOOLCHAIN_DATA_DIR!;
        expect(statSync(dir).mode & 0o777).toBe(0o700);
        expect(statSync(path.join(path.dirname(dir), "local-api-key")).mode & 0o777).toBe(0o600);
      }
    } finally {
      await srv.close();
    }
    logs = [];
    srv = await startServer(configFromEnv(env), {}, (l) => logs.push(l));
    try {
      expect(srv.devKey).toBeUndefined();
      expect(logs.join("\n")).not.toContain(devKey);
      const [info] = await srv.access.listKeys("local");
      expect(await srv.access.revokeKey(info!.keyId)).toBe(true);
    } finally {
      await srv.close();
    }
    logs = [];
    srv = await startServer(configFromEnv(env), {}, (l) => logs.push(l));
    try {
      // every key revoked: no new unrestricted key, the revoked one is not printed, the log says how to get one
      expect(srv.devKey).toBeUndefined();
      expect(await srv.access.countKeys()).toBe(0);
      const out = logs.join("\n");
      expect(out).not.toContain(devKey);
      expect(out).toContain("keys create --workspace");
      expect(await skillsOf(srv.url, devKey)).toBe(401);
    } finally {
      await srv.close();
    }
  }, 240_000);
});
