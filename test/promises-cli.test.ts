/**
 * The `toolchain` command as a user runs it: a child process per command, on the embedded
 * database (a fresh data directory, used by one process at a time) or the server at DATABASE_URL
 * (a fresh schema). Exit codes: 0 success (a run completed), 1 the run ended otherwise / nothing
 * to revoke, 2 usage or a coded error (validation, unknown run, not pending), 3 the run waits for
 * a confirmation. Human output by default, one JSON document with --json (test/cli.test.ts covers
 * the run commands' output in detail).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, describe, expect, test } from "vitest";
import { openDatabase } from "../src/store/db.js";
import { freshSchema, serverUrl } from "./helpers/backends.js";
import { nodeArgs, seedDataDir } from "./helpers/prebuilt.js";
import { waitFor } from "./helpers/wait.js";

interface Out {
  code: number | null;
  stdout: string;
  stderr: string;
}

const dir = mkdtempSync(path.join(tmpdir(), "tc-cli-"));
const schema = serverUrl ? freshSchema("cli") : "toolchain";
const storage: Record<string, string> = serverUrl
  ? { DATABASE_URL: serverUrl, TOOLCHAIN_SCHEMA: schema }
  : { DATABASE_URL: "", TOOLCHAIN_DATA_DIR: seedDataDir(path.join(dir, "pglite")), TOOLCHAIN_SCHEMA: schema };

function cli(
  args: string[],
  env: Record<string, string> = {},
): { done: Promise<Out>; kill: (s: NodeJS.Signals) => void; stderr: () => string } {
  const proc = spawn(process.execPath, [...nodeArgs("src/cli/main.ts"), ...args], {
    env: { ...process.env, REDIS_URL: "", ...storage, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => proc.kill("SIGKILL"), 240_000);
  const done = new Promise<Out>((resolve) =>
    proc.on("exit", (code) => (clearTimeout(timer), resolve({ code, stdout, stderr }))),
  );
  return { done, kill: (s) => proc.kill(s), stderr: () => stderr };
}
const run = (...args: string[]) => cli(args).done;

/** The last JSON object printed (commands print events, then a JSON summary). */
function lastJson(s: string): any {
  const i = s.lastIndexOf("\n{");
  const start = i >= 0 ? i + 1 : s.indexOf("{");
  const end = s.indexOf("\n}", start);
  return JSON.parse(s.slice(start, end + 2));
}

function file(name: string, value: unknown): string {
  const p = path.join(dir, name);
  writeFileSync(p, JSON.stringify(value));
  return p;
}

afterAll(async () => {
  if (!serverUrl) return;
  const pool = new pg.Pool({ connectionString: serverUrl, max: 1 });
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await pool.end();
});

const good = file("good.json", {
  steps: [
    { stepId: "a", skillName: "core.pass", arguments: { value: { n: 1 } } },
    {
      stepId: "b",
      skillName: "core.pass",
      dependsOn: ["a"],
      arguments: { value: { $ref: "steps.a.n" } },
      requireConfirmation: true,
    },
  ],
});
const cyclic = file("cyclic.json", {
  steps: [
    { stepId: "a", skillName: "core.pass", dependsOn: ["b"] },
    { stepId: "b", skillName: "core.pass", dependsOn: ["a"] },
  ],
});
const failing = file("failing.json", { steps: [{ stepId: "x", skillName: "core.fail", retry: { maxAttempts: 1 } }] });

describe(`toolchain CLI (${serverUrl ? "server Postgres" : "embedded"})`, () => {
  test("validate, skills, run, show, confirm, cancel, prune and an unknown command, with their exit codes", async () => {
    const v = await run("validate", good);
    expect([v.code, v.stdout.trim()]).toEqual([0, "valid: 2 steps; topological order: a, b"]);
    const bad = await run("validate", cyclic);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("PLAN_CYCLE: plan has a cycle: a -> b -> a");

    const sk = await run("skills", "--json");
    expect(sk.code).toBe(0);
    expect(JSON.parse(sk.stdout).map((s: { name: string }) => s.name)).toEqual([
      "core.pass",
      "core.wait",
      "core.fail",
      "qtable.task.split",
      "qtable.task.estimate",
      "qtable.gantt.generate",
      "qtable.table.schema.describe",
      "qtable.task.records.create",
      "qtable.notify.send",
    ]);

    // run: prints the events (piped: one line each); waiting for a confirmation exits 3
    const r = await run("run", good, "--context", '{"table":"t1"}');
    expect(r.code).toBe(3);
    expect(r.stdout).toMatch(/step_waiting_confirmation\s+b/);
    const runId: string = /^run (\S+) · /m.exec(r.stdout)![1]!;

    const shown = await run("show", runId, "--json");
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({
      runId,
      status: "waiting_confirmation",
      context: { table: "t1" },
      pendingConfirmations: [expect.objectContaining({ stepId: "b" })],
    });
    const missing = await run("show", "run_does_not_exist");
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("RUN_NOT_FOUND: run run_does_not_exist not found");

    const c = await run("confirm", runId, "b", "approve", "--json");
    expect(c.code).toBe(0);
    expect(lastJson(c.stdout)).toMatchObject({ runId, status: "completed", result: expect.anything() });
    const again = await run("confirm", runId, "b", "reject");
    expect(again.code).toBe(2);
    expect(again.stderr).toContain("CONFIRMATION_NOT_PENDING");

    const f = await run("run", failing, "--json");
    expect(f.code).toBe(1);
    expect(lastJson(f.stdout)).toMatchObject({ status: "failed" });

    // cancel a suspended run: it ends cancelled (nothing to compensate)
    const w2run = await run("run", good, "--json");
    expect(w2run.code).toBe(3);
    const w2 = lastJson(w2run.stdout);
    const cancelled = await run("cancel", w2.runId, "--json");
    expect(cancelled.code).toBe(0);
    expect(lastJson(cancelled.stdout)).toMatchObject({ runId: w2.runId, status: "cancelled" });

    // prune: every finished run is older than -1 hours; the waiting one is kept
    const p = await run("prune", "--older-than-hours", "-1", "--json");
    expect(p.code).toBe(0);
    expect(JSON.parse(p.stdout).pruned.sort()).toEqual([runId, lastJson(f.stdout).runId, w2.runId].sort());

    const u = await run("frobnicate");
    expect(u.code).toBe(2);
    expect(u.stderr).toContain('unknown command "frobnicate"');
  }, 1_200_000);

  test("keys create / list / revoke; the key is stored only as its sha256", async () => {
    const created = await run("keys", "create", "--workspace", "acme", "--skills", "core.*", "--label", "ci");
    expect(created.code).toBe(0);
    const k = JSON.parse(created.stdout);
    expect(k).toMatchObject({
      key: expect.stringMatching(/^tck_/),
      keyId: expect.stringMatching(/^key_/),
      workspaceId: "acme",
      allowedSkills: ["core.*"],
    });
    expect(created.stderr).toContain("not shown again");

    const listed = await run("keys", "list", "--workspace", "acme");
    expect(listed.code).toBe(0);
    expect(listed.stdout).not.toContain(k.key);
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ keyId: k.keyId, label: "ci" })]);

    // the database holds the hash, never the key
    const db = await openDatabase(
      serverUrl ? { url: serverUrl, schema, poolSize: 1 } : { dataDir: storage.TOOLCHAIN_DATA_DIR, schema },
    );
    try {
      const { rows } = await db.pool.query(`SELECT * FROM "${schema}".tool_chain_api_keys`);
      expect(rows).toHaveLength(1);
      expect(JSON.stringify(rows)).not.toContain(k.key);
      const { createHash } = await import("node:crypto");
      expect(rows[0].key_sha256).toBe(createHash("sha256").update(k.key).digest("hex"));
    } finally {
      await db.close();
    }

    expect((await run("keys", "revoke", k.keyId)).code).toBe(0);
    const twice = await run("keys", "revoke", "key_unknown");
    expect([twice.code, JSON.parse(twice.stdout)]).toEqual([1, { revoked: false }]);
    expect((await run("keys", "create")).code).toBe(2); // no --workspace
  }, 900_000);

  // several processes on one database need a server (an embedded database belongs to one process)
  test.runIf(serverUrl)(
    "worker executes a queued run and stops on SIGTERM with exit 0",
    async () => {
      const { openRuntime } = await import("../src/runtime/open.js");
      const api = await openRuntime({ databaseUrl: serverUrl, schema, poolSize: 1 });
      try {
        const { runId } = await api.runtime.submit({
          steps: [{ stepId: "a", skillName: "core.wait", arguments: { ms: 10, value: 7 } }],
        });
        const w = cli(["worker"], { TOOLCHAIN_WORKER_POLL_MS: "50" });
        await waitFor(async () => (await api.runtime.store.getRow(runId))?.status === "completed", {
          timeoutMs: 240_000,
          intervalMs: 50,
          what: `queued run ${runId} completed by the worker`,
        });
        expect(w.stderr()).toContain("polling for runs");
        w.kill("SIGTERM");
        expect((await w.done).code).toBe(0);
      } finally {
        await api.close();
      }
    },
    300_000,
  );
});
