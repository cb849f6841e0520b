/**
 * A durable runtime from configuration: server Postgres when `databaseUrl` (DATABASE_URL) is set,
 * otherwise embedded Postgres in `dataDir` (TOOLCHAIN_DATA_DIR, default ./.data/pglite).
 * Migrations and LangGraph's checkpoint setup run on open.
 */
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { openDatabase, type Database } from "../store/db.js";
import { migrate } from "../store/migrations.js";
import { PgLimits } from "../store/limits-store.js";
import { PgRunStore } from "../store/pg-run-store.js";
import { defaultOwner, Runtime, type RuntimeOptions } from "./runtime.js";

export interface OpenRuntimeOptions extends Omit<RuntimeOptions, "checkpointer" | "store"> {
  databaseUrl?: string;
  /** Embedded data directory; `":memory:"` keeps it in memory. */
  dataDir?: string;
  schema?: string;
  poolSize?: number;
}

export interface OpenedRuntime {
  runtime: Runtime;
  db: Database;
  saver: PostgresSaver;
  close(): Promise<void>;
}

export async function openRuntime(opts: OpenRuntimeOptions = {}): Promise<OpenedRuntime> {
  const url = opts.databaseUrl ?? process.env.DATABASE_URL;
  const dataDir = opts.dataDir ?? process.env.TOOLCHAIN_DATA_DIR ?? ".data/pglite";
  const schema = opts.schema ?? process.env.TOOLCHAIN_SCHEMA;
  const db = await openDatabase({ url: url || undefined, dataDir: dataDir === ":memory:" ? undefined : dataDir, schema, poolSize: opts.poolSize });
  try {
    const saver = new PostgresSaver(db.pool, undefined, { schema: db.schema });
    await migrate(db, saver);
    const leaseTtlMs = opts.leaseTtlMs ?? (process.env.TOOLCHAIN_LEASE_TTL_MS ? Number(process.env.TOOLCHAIN_LEASE_TTL_MS) : undefined);
    const owner = opts.owner ?? defaultOwner();
    // serial keys and resources hold across every process on this database
    const limits = opts.limits ?? new PgLimits(db, { owner, leaseTtlMs });
    const runtime = new Runtime({ ...opts, owner, leaseTtlMs, limits, checkpointer: saver, store: new PgRunStore(db) });
    return {
      runtime,
      db,
      saver,
      async close() {
        await runtime.drain();
        await limits.close();
        await db.close();
      },
    };
  } catch (e) {
    await db.close();
    throw e;
  }
}
