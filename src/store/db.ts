/**
 * Database access: a server Postgres when DATABASE_URL is set, otherwise an embedded Postgres
 * (PGlite, real Postgres in-process) served over a private unix socket so the same `pg.Pool`,
 * the same SQL and LangGraph's PostgresSaver work unchanged.
 *
 * Embedded mode uses a pool of ONE connection: PGlite is single-session and the socket server
 * multiplexes every client onto it, so two pool clients could interleave their transactions.
 * One client serialises them (one process owns an embedded database).
 */
import { chmodSync, mkdtempSync, mkdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { poolTypes } from "./pg-types.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";

export interface Database {
  pool: pg.Pool;
  /** Postgres schema holding our tables and LangGraph's checkpoint tables. */
  schema: string;
  kind: "server" | "embedded";
  /** Connection string other processes can use (server mode only). */
  url?: string;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** Server Postgres. Absent: embedded. */
  url?: string;
  /** Embedded data directory; absent: in memory (lost on exit). */
  dataDir?: string;
  schema?: string;
  /** Server pool size. @default 10 */
  poolSize?: number;
}

const SCHEMA_RE = /^[a-z_][a-z0-9_]{0,62}$/;

export async function openDatabase(opts: OpenDatabaseOptions = {}): Promise<Database> {
  const schema = opts.schema ?? "toolchain";
  if (!SCHEMA_RE.test(schema)) throw new TypeError(`Expected schema to match ${SCHEMA_RE}, got "${schema}"`);
  if (opts.url) {
    const pool = new pg.Pool({ connectionString: opts.url, max: opts.poolSize ?? 10, types: poolTypes });
    // A server restart errors every connection; a checked-out client with no listener would crash
    // the process. The failure surfaces on the next query instead, and the pool drops the client.
    pool.on("error", () => undefined);
    pool.on("connect", (client) => client.on("error", () => undefined));
    return { pool, schema, kind: "server", url: opts.url, close: () => pool.end() };
  }
  return openEmbedded(schema, opts.dataDir);
}

/** Embedded directories held by this process (a process may open its own directory again, e.g. tests). */
const heldHere = new Map<string, number>();

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
};

/**
 * PGlite is one process's database: a second process opening the same directory (the CLI beside
 * `npm start`) would corrupt it. A lock file beside the directory names the holder; one left by
 * a dead process (SIGKILL) is taken over.
 */
function lockEmbedded(dataDir: string): () => void {
  const file = `${path.resolve(dataDir)}.lock`;
  const release = () => {
    const n = (heldHere.get(file) ?? 1) - 1;
    if (n > 0) return void heldHere.set(file, n);
    heldHere.delete(file);
    try {
      if (readFileSync(file, "utf8").trim() === String(process.pid)) unlinkSync(file);
    } catch {
      /* already gone */
    }
  };
  if (heldHere.has(file)) {
    heldHere.set(file, heldHere.get(file)! + 1);
    return release;
  }
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(file, String(process.pid), { flag: "wx", mode: 0o600 });
      heldHere.set(file, 1);
      return release;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST" || attempt > 0) throw e;
      const pid = Number(readFileSync(file, "utf8").trim());
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) {
        throw new ToolchainError(
          ErrorCode.NOT_READY,
          `the embedded database in ${dataDir} is in use by process ${pid} (\`npm start\`?): talk to that server (CLI: --url and --key), stop it, or set DATABASE_URL`,
        );
      }
      unlinkSync(file); // left by a process that died
    }
  }
}

async function openEmbedded(schema: string, dataDir: string | undefined): Promise<Database> {
  const { PGlite } = await import("@electric-sql/pglite");
  const { PGLiteSocketServer } = await import("@electric-sql/pglite-socket");
  let unlock = () => {};
  if (dataDir) {
    // the database holds every workspace's plans, context and key hashes: owner only
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    chmodSync(dataDir, 0o700);
    unlock = lockEmbedded(dataDir);
  }
  let db: InstanceType<typeof PGlite>;
  try {
    db = dataDir ? await PGlite.create(dataDir) : await PGlite.create();
  } catch (e) {
    unlock();
    throw e;
  }
  // unix socket paths are limited to ~100 bytes: keep it short and private
  const sockDir = mkdtempSync(path.join(tmpdir(), "tcpg-"));
  const server = new PGLiteSocketServer({ db, path: path.join(sockDir, ".s.PGSQL.5432"), maxConnections: 4 });
  await server.start();
  const pool = new pg.Pool({ host: sockDir, port: 5432, user: "postgres", database: "postgres", max: 1, types: poolTypes });
  pool.on("error", () => undefined);
  return {
    pool,
    schema,
    kind: "embedded",
    async close() {
      await pool.end().catch(() => undefined);
      await server.stop().catch(() => undefined);
      await db.close().catch(() => undefined);
      rmSync(sockDir, { recursive: true, force: true });
      unlock();
    },
  };
}

/** A schema-qualified table name. */
export function table(db: Pick<Database, "schema">, name: string): string {
  return `"${db.schema}".${name}`;
}
