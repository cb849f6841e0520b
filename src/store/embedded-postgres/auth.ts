/**
 * How clients prove they may use the embedded postgres server: a random password (SCRAM) kept in
 * a file only the owning account can read (`<dataDir>.secret`, mode 0600), and a pg_hba.conf
 * allowing password logins over the unix socket only. Trust authentication is never left on:
 * as root, postgres runs as a shared system account (`postgres`, `nobody`), and any process of
 * that account could otherwise connect as superuser.
 *
 * The password is set in single-user mode (no listener at all) before the server first starts,
 * on a fresh cluster and on one made by an earlier version with trust authentication.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { childEnv, type Binaries, type RunAs } from "./platform.js";

const HBA =
  "# written by toolchain (src/store/embedded-postgres/auth.ts): password logins over the private unix socket only\nlocal all all scram-sha-256\n";

/** The password file of a data directory: beside it, like its lock file (not inside: postgres's account owns that). */
export const secretFileOf = (dataDir: string) => `${dataDir}.secret`;

/** The password, or undefined when there is no file yet (another error, e.g. EACCES, is thrown). */
export function readSecret(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8").trim() || undefined;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}

function writeSecret(file: string, password: string): void {
  const tmp = `${file}.${process.pid}`;
  writeFileSync(tmp, `${password}\n`, { mode: 0o600 });
  renameSync(tmp, file);
}

/**
 * Make the cluster in `dataDir` take the password in `file` and nothing else; returns the
 * password. The server must not be running (single-user mode takes the directory).
 */
export async function ensurePassword(
  dataDir: string,
  file: string,
  as: RunAs | undefined,
  bin: Binaries,
): Promise<string> {
  const hbaFile = path.join(dataDir, "pg_hba.conf");
  const have = readSecret(file);
  let hba = "";
  try {
    hba = readFileSync(hbaFile, "utf8");
  } catch {
    /* written below */
  }
  if (have && hba === HBA) return have;
  const password = randomBytes(24).toString("hex"); // hex: no quoting in SQL or URLs
  await singleUser(dataDir, as, bin, `ALTER ROLE postgres PASSWORD '${password}'`);
  writeFileSync(hbaFile, HBA); // an existing file keeps its owner and mode
  writeSecret(file, password);
  return password;
}

/** One statement in a single-user backend (no socket, no other session). */
function singleUser(dataDir: string, as: RunAs | undefined, bin: Binaries, sql: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const child = spawn(
      bin.postgres,
      ["--single", "-D", dataDir, "-c", "lc_messages=C", "-c", "io_method=sync", "postgres"],
      {
        ...(as ? { uid: as.uid, gid: as.gid } : {}),
        env: childEnv(),
        stdio: ["pipe", "pipe", "pipe"],
      },
    );
    let out = "";
    child.stdout!.on("data", (d: Buffer) => (out += d));
    child.stderr!.on("data", (d: Buffer) => (out += d));
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 && !/\bERROR:/.test(out)
        ? resolve()
        : reject(new Error(`postgres --single failed (exit ${code}) in ${dataDir}: ${out.slice(-2000)}`)),
    );
    child.stdin!.end(`${sql}\n`);
  });
}
