/**
 * One postgres server process on a data directory: initdb, start under a watchdog (no orphans),
 * stop; postmaster.pid reading, the owner's lock file, leftovers of dead processes.
 */
import { spawn, type ChildProcess } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { platform, tmpdir } from "node:os";
import path from "node:path";
import { ErrorCode, ToolchainError } from "../../kernel/errors.js";
import { alive, childEnv, giveTo, sleep, type Binaries, type RunAs } from "./platform.js";

export const SOCKET_PORT = 5432; // only names the socket file: no TCP listener
export const READY_TIMEOUT_MS = Number(process.env.TOOLCHAIN_EMBEDDED_PG_TIMEOUT_MS || 60_000);

const SOCKET_PREFIX = "tcpg-s-";
export const MEM_PREFIX = "tcpg-mem-";

/**
 * Socket directories and throw-away clusters are named after the process that made them; a
 * process that exited without closing (its watchdog stopped postgres) leaves them: remove them.
 */
function sweepTmp() {
  for (const name of readdirSync(tmpdir())) {
    const m = /^tcpg-(?:s|mem)-(\d+)-/.exec(name);
    if (!m || alive(Number(m[1]))) continue;
    const data = path.join(tmpdir(), name, "data");
    const pm = readPostmasterPid(data);
    if (pm && alive(pm.pid) && isPostmasterOf(pm.pid, data)) continue; // still shutting down
    rmSync(path.join(tmpdir(), name), { recursive: true, force: true });
  }
}

interface PostmasterPid {
  pid: number;
  socketDir: string;
  port: number;
  status: string;
}

/** postmaster.pid: pid, data dir, start time, port, socket dir, listen address, shmem key, status. */
export function readPostmasterPid(dataDir: string): PostmasterPid | undefined {
  let text: string;
  try {
    text = readFileSync(path.join(dataDir, "postmaster.pid"), "utf8");
  } catch {
    return undefined;
  }
  const l = text.split("\n");
  return { pid: Number(l[0]), port: Number(l[3]), socketDir: l[4] ?? "", status: (l[7] ?? "").trim() };
}

/** Is pid a postgres postmaster serving dataDir (not a reused pid)? */
function isPostmasterOf(pid: number, dataDir: string): boolean {
  try {
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
    return path.basename(argv[0] ?? "") === "postgres" && argv.includes(dataDir);
  } catch {
    return platform() !== "linux" && alive(pid); // no /proc: trust the pid
  }
}

/** Lock file naming the owner; returns the live holder's pid when another process holds it. */
export function tryLock(file: string): number | undefined {
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: "wx", mode: 0o600 });
      return undefined;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST" || attempt > 1) throw e;
      const pid = Number(readFileSync(file, "utf8").trim());
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) return pid;
      unlinkSync(file); // left by a process that died
    }
  }
}

export function unlock(file: string) {
  try {
    if (readFileSync(file, "utf8").trim() === String(process.pid)) unlinkSync(file);
  } catch {
    /* already gone */
  }
}

/** Stop a postmaster that outlived its owner (its watchdog was killed too) before starting ours. */
export async function stopLeftover(dataDir: string): Promise<void> {
  const pm = readPostmasterPid(dataDir);
  if (!pm || !Number.isInteger(pm.pid) || pm.pid <= 0) return;
  if (!alive(pm.pid)) return; // postgres itself treats a dead pid's postmaster.pid as stale
  if (!isPostmasterOf(pm.pid, dataDir)) {
    unlinkSync(path.join(dataDir, "postmaster.pid")); // the pid was reused by another program
    return;
  }
  process.kill(pm.pid, "SIGINT"); // fast shutdown
  for (const until = Date.now() + 20_000; Date.now() < until;) {
    if (!alive(pm.pid)) return;
    await sleep(50);
  }
  process.kill(pm.pid, "SIGQUIT"); // immediate shutdown (recovery on next start)
  for (const until = Date.now() + 5_000; Date.now() < until && alive(pm.pid);) await sleep(50);
}

/** initdb into a sibling directory, then rename into place: an interrupted initdb leaves no half cluster. */
export async function initCluster(
  dataDir: string,
  as: RunAs | undefined,
  bin: Binaries,
  durable: boolean,
): Promise<void> {
  const tmp = `${dataDir}.initdb-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { mode: 0o700 });
  giveTo(tmp, as);
  const args = [
    `--pgdata=${tmp}`,
    "--auth=trust",
    "--username=postgres",
    "--encoding=UTF8",
    "--locale=C",
    "--no-instructions",
    ...(durable ? [] : ["--no-sync"]),
  ];
  await new Promise<void>((resolve, reject) => {
    const child = spawn(bin.initdb, args, {
      ...(as ? { uid: as.uid, gid: as.gid } : {}),
      env: childEnv(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout!.on("data", (d: Buffer) => (out += d));
    child.stderr!.on("data", (d: Buffer) => (out += d));
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`initdb failed (exit ${code}) in ${tmp}: ${out.slice(-2000)}`)),
    );
  }).catch((e) => {
    rmSync(tmp, { recursive: true, force: true });
    throw e;
  });
  rmSync(dataDir, { recursive: true, force: true }); // the empty directory we created
  renameSync(tmp, dataDir);
}

// The watchdog: postgres in the background, stdin (fd 3) watched; EOF (our process is gone or
// closing) sends SIGINT. It prints postgres' pid first and exits with postgres' status.
const WATCHDOG = `exec 3<&0
"$0" "$@" </dev/null & pid=$!
echo "$pid"
(read _ <&3; kill -INT "$pid" 2>/dev/null) & w=$!
wait "$pid"; code=$?
kill "$w" 2>/dev/null
exit "$code"`;

/** A postgres server this process started. */
export class Server {
  private log = "";
  private pid?: number;
  private readonly exited: Promise<number | null>;
  private constructor(
    readonly dataDir: string,
    readonly socketDir: string,
    private readonly child: ChildProcess,
  ) {
    this.exited = new Promise((r) => child.on("close", (code) => r(code)));
  }

  static async start(dataDir: string, as: RunAs | undefined, bin: Binaries, durable: boolean): Promise<Server> {
    // unix socket paths are limited to ~100 bytes: a short private directory
    try {
      sweepTmp();
    } catch {
      /* best effort */
    }
    const socketDir = mkdtempSync(path.join(tmpdir(), `${SOCKET_PREFIX}${process.pid}-`));
    giveTo(socketDir, as);
    const flags = [
      "-D",
      dataDir,
      "-k",
      socketDir,
      "-p",
      String(SOCKET_PORT),
      "-c",
      "listen_addresses=",
      "-c",
      "unix_socket_permissions=0700",
      "-c",
      "lc_messages=C",
    ];
    // fewer idle processes (memory): synchronous I/O instead of 3 I/O workers, no logical replication launcher
    flags.push("-c", "io_method=sync", "-c", "max_logical_replication_workers=0");
    // a throw-away cluster needs no durability
    if (!durable) flags.push("-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off");
    const child = spawn("/bin/sh", ["-c", WATCHDOG, bin.postgres, ...flags], {
      ...(as ? { uid: as.uid, gid: as.gid } : {}),
      // own process group: a terminal's Ctrl-C reaches node (which drains, then stops postgres), not postgres
      detached: true,
      env: childEnv(),
      stdio: ["pipe", "pipe", "pipe"],
    });
    const server = new Server(dataDir, socketDir, child);
    child.stdout!.once("data", (d: Buffer) => (server.pid = Number(String(d).trim())));
    child.stderr!.on("data", (d: Buffer) => (server.log = (server.log + d).slice(-8_000)));
    child.on("error", (e) => (server.log += `\n${e.message}`));
    // neither the child nor its pipes keep node alive; closing stdin at exit is the stop signal
    child.unref();
    for (const s of [child.stdin, child.stdout, child.stderr]) (s as unknown as { unref?: () => void })?.unref?.();
    let gone = false;
    void server.exited.then(() => (gone = true));
    for (const until = Date.now() + READY_TIMEOUT_MS; ;) {
      const pm = readPostmasterPid(dataDir);
      if (server.pid && pm?.pid === server.pid && pm.status === "ready") return server;
      if (gone || Date.now() > until) {
        child.stdin!.end();
        await server.exited;
        rmSync(socketDir, { recursive: true, force: true });
        throw new ToolchainError(
          ErrorCode.NOT_READY,
          `embedded Postgres did not start in ${dataDir}${gone ? "" : ` within ${READY_TIMEOUT_MS} ms`}: ${server.log.slice(-2000)}`,
        );
      }
      await sleep(25);
    }
  }

  async stop(): Promise<void> {
    this.child.ref(); // keep node alive until postgres is down (a CLI exits right after close)
    this.child.stdin!.end(); // the watchdog sends SIGINT (fast shutdown) and exits with postgres
    const t = setTimeout(() => this.pid && alive(this.pid) && process.kill(this.pid, "SIGQUIT"), 20_000);
    await this.exited;
    clearTimeout(t);
    rmSync(this.socketDir, { recursive: true, force: true });
  }
}
