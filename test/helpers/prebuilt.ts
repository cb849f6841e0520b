/**
 * What test/setup/global.ts builds once per run, as the tests use it: child processes started
 * from bundles, and embedded data directories copied from an initialised one. Both fall back to
 * the slow way (tsx, an empty directory) when the build is absent, e.g. with DATABASE_URL set.
 */
import { cpSync, existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { bundleName } from "../../scripts/bundle.js";
import { embeddedEngine } from "../../src/store/db.js";

/** Entry points children are started from (paths relative to the repository). */
export const BUNDLED_ENTRIES = [
  "src/cli/main.ts",
  "examples/agent.ts",
  "test/fixtures/crash-child.ts",
  "test/fixtures/cli-versioned.ts",
  "test/fixtures/fault-child.ts",
  "test/fixtures/qtable-child.ts",
  "test/fixtures/migrate-child.ts",
  "test/fixtures/embedded-owner.ts",
  "test/fixtures/approver-child.ts",
];

const build = () => process.env.TOOLCHAIN_TEST_BUILD;

/**
 * Node's arguments to run a TypeScript entry (a path relative to the repository) in a child: its
 * bundle when there is one, else the source through tsx (what `node --import tsx` does).
 */
export function nodeArgs(entry: string): string[] {
  const dir = build();
  const bundle = dir && path.join(dir, bundleName(path.relative(process.cwd(), path.resolve(entry))));
  // --liftoff-only: V8's baseline WebAssembly compiler alone. A child lives seconds; optimising
  // PGlite's WASM in the background cost it about as much CPU again as everything else it did.
  return bundle && existsSync(bundle) ? ["--liftoff-only", bundle] : ["--import", "tsx", path.resolve(entry)];
}

/**
 * `dir` as a new embedded data directory: a copy of the initialised one (every migration applied
 * in schema "toolchain") for PGlite, else left empty (the first process initialises it).
 */
export function seedDataDir(dir: string): string {
  const template = process.env.TOOLCHAIN_TEST_PGLITE && path.join(process.env.TOOLCHAIN_TEST_PGLITE, "pglite-template");
  if (template && embeddedEngine() === "pglite" && existsSync(template)) cpSync(template, dir, { recursive: true });
  return dir;
}

/** A fresh embedded data directory in the temporary directory (see seedDataDir). */
export function freshDataDir(prefix = "tc-crash-"): string {
  return seedDataDir(mkdtempSync(path.join(tmpdir(), prefix)));
}
