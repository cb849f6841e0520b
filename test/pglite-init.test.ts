/**
 * A fresh embedded data directory is initialised in a child process (src/store/pglite-init.ts),
 * so the server never holds initdb's WASM memory, and a directory is only ever seen complete.
 */
import { mkdtempSync, mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, test } from "vitest";
import { initialiseInChild, isInitialised } from "../src/store/pglite-init.js";

describe("initialising an embedded data directory", () => {
  test("an empty directory is initialised by a child: complete, owner-only, this process's memory untouched", async () => {
    const parent = mkdtempSync(path.join(tmpdir(), "tc-init-"));
    const dir = path.join(parent, "db");
    mkdirSync(dir);
    const before = process.memoryUsage().external;
    expect(await initialiseInChild(dir)).toBe(true);
    // in-process, initdb grows this process's external (WASM) memory by ~600 MB
    expect(process.memoryUsage().external - before).toBeLessThan(50 * 2 ** 20);
    expect(isInitialised(dir)).toBe(true);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(readdirSync(parent)).toEqual(["db"]); // no half-made sibling left behind
    expect(await initialiseInChild(dir)).toBe(false); // initialised: left as it is
  }, 120_000);

  test("a directory holding something else is left to PGlite, untouched", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "tc-init-"));
    writeFileSync(path.join(dir, "stray"), "x");
    expect(await initialiseInChild(dir)).toBe(false);
    expect(readdirSync(dir)).toEqual(["stray"]);
  });
});

describe("PGlite's shared buffers", () => {
  test("32MB by default, TOOLCHAIN_PGLITE_SHARED_BUFFERS sets it, a bad value is refused naming the variable", async () => {
    const { openDatabase } = await import("../src/store/db.js");
    const dir = mkdtempSync(path.join(tmpdir(), "tc-sb-"));
    const show = async (dataDir: string) => {
      const db = await openDatabase({ dataDir, engine: "pglite" });
      try {
        return (await db.pool.query("SHOW shared_buffers")).rows[0].shared_buffers as string;
      } finally {
        await db.close();
      }
    };
    expect(await show(path.join(dir, "a"))).toBe("32MB");
    process.env.TOOLCHAIN_PGLITE_SHARED_BUFFERS = "16MB";
    try {
      expect(await show(path.join(dir, "a"))).toBe("16MB");
      process.env.TOOLCHAIN_PGLITE_SHARED_BUFFERS = "lots";
      await expect(show(path.join(dir, "b"))).rejects.toThrow(/TOOLCHAIN_PGLITE_SHARED_BUFFERS/);
    } finally {
      delete process.env.TOOLCHAIN_PGLITE_SHARED_BUFFERS;
    }
  }, 120_000);
});
