/**
 * Identity from the command line, in child processes against a real server on Postgres (the
 * server at DATABASE_URL, or an embedded data directory): a
 * configured personal key (TOOLCHAIN_API_KEYS `user`), `toolchain keys create --user --name
 * --roles`, a viewer refused, a cancel recorded as the operator's through the CLI, and
 * `toolchain audit` printing the event log as JSON lines.
 */
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, describe, expect, test } from "vitest";
import { configFromEnv, startServer } from "../src/server/serve.js";
import { freshSchema, serverUrl } from "./helpers/backends.js";
import { call } from "./helpers/api.js";
import { nodeArgs, seedDataDir } from "./helpers/prebuilt.js";

const schema = serverUrl ? freshSchema("who") : "toolchain";
const storage: Record<string, string> = serverUrl
  ? { DATABASE_URL: serverUrl, TOOLCHAIN_SCHEMA: schema }
  : {
      DATABASE_URL: "",
      TOOLCHAIN_DATA_DIR: seedDataDir(path.join(mkdtempSync(path.join(tmpdir(), "tc-who-")), "pglite")),
    };
afterAll(async () => {
  if (!serverUrl) return;
  const pool = new pg.Pool({ connectionString: serverUrl, max: 1 });
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await pool.end();
});

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // the CLI's prebuilt bundle (test/setup/global.ts), as the other CLI tests start it
  const proc = spawn(process.execPath, [...nodeArgs("src/cli/main.ts"), ...args], {
    env: { ...process.env, REDIS_URL: "", TOOLCHAIN_URL: "", TOOLCHAIN_API_KEY: "", NO_COLOR: "1", ...storage },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => proc.kill("SIGKILL"), 120_000);
  return new Promise((resolve) => proc.on("exit", (code) => (clearTimeout(timer), resolve({ code, stdout, stderr }))));
}

const opsKey = "tck_operator-olga-0123456789abcdefghijklmnop";

describe("identity from the CLI", () => {
  test("keys create --user, a configured personal key, cancel through the CLI, audit as JSON lines", async () => {
    // keys are made before the server starts (an embedded database has one owner at a time)
    const made = await cli([
      "keys",
      "create",
      "--workspace",
      "who",
      "--user",
      "ada",
      "--name",
      "Ada Lovelace",
      "--roles",
      "approver,viewer",
    ]);
    expect(made.code).toBe(0);
    const created = JSON.parse(made.stdout) as { key: string; user: unknown };
    expect(created.user).toEqual({ id: "ada", name: "Ada Lovelace", roles: ["approver", "viewer"] });
    const bad = await cli(["keys", "create", "--workspace", "who", "--user", "bob", "--roles", "root"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--roles");
    const orphan = await cli(["keys", "create", "--workspace", "who", "--roles", "viewer"]);
    expect([orphan.code, orphan.stderr.includes("--user")]).toEqual([2, true]);

    const srv = await startServer(
      configFromEnv({
        ...storage,
        PORT: "0",
        TOOLCHAIN_DEV_KEY: "0",
        TOOLCHAIN_AUTH_CACHE_MS: "0",
        TOOLCHAIN_API_KEYS: JSON.stringify([
          { workspace: "who", key: opsKey, user: { id: "olga", name: "Olga", roles: ["operator"] } },
        ]),
      }),
      {},
      () => undefined,
    );
    try {
      const run = await call(srv.url, "POST", "/api/tool-chains/run", {
        key: opsKey,
        body: { plan: { steps: [{ stepId: "w", skillName: "core.wait", arguments: { ms: 30_000 } }] }, wait: false },
      });
      expect(run.status).toBe(202);
      expect(run.body.requestedBy).toMatchObject({ kind: "user", id: "olga", name: "Olga", via: "rest" });
      const runId = run.body.runId as string;
      // ada may approve and read, not cancel
      const refused = await cli(["cancel", runId, "--url", srv.url, "--key", created.key]);
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain("ROLE_NOT_ALLOWED");
      const cancelled = await cli(["cancel", runId, "--reason", "wrong plan", "--url", srv.url, "--key", opsKey]);
      expect(cancelled.code).toBe(0);

      const audit = await cli(["audit", runId, "--url", srv.url, "--key", created.key]);
      expect(audit.code).toBe(0);
      const lines = audit.stdout
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as { seq: number; type: string; data: Record<string, unknown> });
      expect(lines.map((l) => l.seq)).toEqual(lines.map((_, i) => i + 1));
      expect(lines.find((l) => l.type === "run_cancel_requested")!.data).toEqual({
        reason: "wrong plan",
        by: { kind: "user", id: "olga", name: "Olga" },
        via: "cli",
      });
      expect(lines.at(-1)!.type).toBe("run_failed");
    } finally {
      await srv.close();
    }
  }, 240_000);
});
