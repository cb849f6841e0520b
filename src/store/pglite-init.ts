/**
 * A fresh PGlite data directory is initialised (initdb) in a short-lived child process. In-process,
 * initdb's WASM memory grows to ~600 MB and a process never gives that back (closing the instance
 * frees V8's side, not the RSS): a server that initialised its own directory idled at ~550 MB,
 * one started on an initialised directory at ~440 MB (bench/embedded-engines.ts, `idle_*`).
 */
import { spawn } from "node:child_process";
import { chmodSync, existsSync, readdirSync, renameSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

/** PGlite marks an initialised directory as Postgres does. */
export function isInitialised(dataDir: string): boolean {
  return existsSync(path.join(dataDir, "PG_VERSION"));
}

/**
 * Initialise an empty `dataDir` in a child process: into a sibling directory first, renamed into
 * place only once complete, so a kill mid-way leaves the directory empty (tried again next start)
 * rather than half made. A non-empty directory without PG_VERSION is left to PGlite, as before.
 */
export async function initialiseInChild(dataDir: string, options: Record<string, unknown> = {}): Promise<boolean> {
  if (isInitialised(dataDir) || readdirSync(dataDir).length) return false;
  const tmp = `${path.resolve(dataDir)}.init-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  const entry = createRequire(import.meta.url).resolve("@electric-sql/pglite");
  const script = `(async () => {
    const { PGlite } = require(process.argv[1]);
    const db = await PGlite.create({ ...JSON.parse(process.argv[3]), dataDir: process.argv[2] });
    await db.query("SELECT 1");
    await db.close();
  })().catch((e) => { console.error(e && e.stack || String(e)); process.exit(1); });`;
  const stderr: string[] = [];
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(process.execPath, ["-e", script, entry, tmp, JSON.stringify(options)], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    child.stderr.on("data", (d: Buffer) => stderr.push(d.toString()));
    child.on("error", reject);
    child.on("exit", resolve);
  });
  if (code !== 0 || !isInitialised(tmp)) {
    rmSync(tmp, { recursive: true, force: true });
    throw new Error(
      `initialising the embedded database in ${dataDir} failed (exit ${code}): ${stderr.join("").slice(0, 2000)}`,
    );
  }
  renameSync(tmp, dataDir); // replaces the empty directory atomically
  chmodSync(dataDir, 0o700);
  return true;
}
