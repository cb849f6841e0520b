/**
 * A private Postgres server for tests that restart the database (the shared one serves other
 * test files). Needs the server binaries (Debian: /usr/lib/postgresql/<v>/bin) and, as root,
 * the `postgres` system user.
 */
import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

function binDir(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const v = readdirSync(root).sort().at(-1);
  const dir = v && path.join(root, v, "bin");
  return dir && existsSync(path.join(dir, "pg_ctl")) ? dir : undefined;
}

export const privatePostgresAvailable = (() => {
  if (!binDir()) return false;
  if (process.getuid?.() !== 0) return true;
  try {
    execFileSync("id", ["postgres"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
})();

export interface PrivatePostgres {
  url: string;
  restart(): void;
  stop(): void;
}

export function startPrivatePostgres(port: number): PrivatePostgres {
  const bin = binDir()!;
  const dir = mkdtempSync(path.join(tmpdir(), "tc-pg-"));
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    chownSync(dir, uid, gid);
  }
  const run = (cmd: string, args: string[]) =>
    asRoot
      ? execFileSync("runuser", ["-u", "postgres", "--", path.join(bin, cmd), ...args], { stdio: "pipe" })
      : execFileSync(path.join(bin, cmd), args, { stdio: "pipe" });
  const data = path.join(dir, "data");
  run("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]);
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
  run("pg_ctl", ["-D", data, "-o", opts, "-w", "-l", path.join(dir, "log"), "start"]);
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    restart: () =>
      void run("pg_ctl", ["-D", data, "-o", opts, "-w", "-m", "fast", "-l", path.join(dir, "log"), "restart"]),
    stop: () => {
      try {
        run("pg_ctl", ["-D", data, "-w", "-m", "immediate", "stop"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
