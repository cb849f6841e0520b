/**
 * A private Postgres server for tests that restart the database (the shared one serves other
 * test files). Needs the server binaries (Debian: /usr/lib/postgresql/<v>/bin) and, as root,
 * the `postgres` system user.
 */
import { execFileSync } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
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

/** A port above the kernel's ephemeral range (32768-60999 here): no client socket can hold it. */
const freshPort = () => 61_000 + Math.floor(Math.random() * 4_000);

/**
 * Starts a server on a port of its own choosing; a start that fails (the port taken by another
 * test's server) is retried on another port, and the last failure carries the server's log.
 */
export function startPrivatePostgres(): PrivatePostgres {
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
  const log = path.join(dir, "log");
  run("initdb", ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]);
  let port = 0;
  let opts = "";
  for (let attempt = 1; ; attempt++) {
    port = freshPort();
    opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`;
    try {
      run("pg_ctl", ["-D", data, "-o", opts, "-w", "-l", log, "start"]);
      break;
    } catch (err) {
      if (attempt < 5) continue;
      const tail = existsSync(log) ? readFileSync(log, "utf8").split("\n").slice(-20).join("\n") : "(no log)";
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`private Postgres did not start after ${attempt} ports: ${(err as Error).message}\n${tail}`);
    }
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    restart: () => void run("pg_ctl", ["-D", data, "-o", opts, "-w", "-m", "fast", "-l", log, "restart"]),
    stop: () => {
      try {
        run("pg_ctl", ["-D", data, "-w", "-m", "immediate", "stop"]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
