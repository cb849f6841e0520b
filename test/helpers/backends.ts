/**
 * The backends every shared suite runs against: memory, and Postgres (the server at
 * DATABASE_URL when set, else embedded: PGlite, or a postgres child process with
 * TOOLCHAIN_EMBEDDED_ENGINE=postgres). Each Postgres runtime gets its own schema.
 */
import { randomUUID } from "node:crypto";
import { MemorySaver } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { openRuntime } from "../../src/runtime/open.js";
import { MemoryRunStore } from "../../src/store/memory-run-store.js";
import { PgRunStore } from "../../src/store/pg-run-store.js";
import { PgLimits } from "../../src/store/limits-store.js";
import { embeddedEngine, type Database } from "../../src/store/db.js";
import { Runtime, type RuntimeOptions } from "../../src/runtime/runtime.js";

type Opts = Omit<RuntimeOptions, "checkpointer" | "store">;

export interface Backend {
  name: string;
  /** Fresh runtime with isolated storage; call the returned close when done. */
  open(opts?: Opts): Promise<{ runtime: Runtime; close(): Promise<void>; schema?: string; db?: Database }>;
  /** Two runtimes (distinct owners, like two processes) on the same storage. */
  openPair(opts?: Opts): Promise<{ a: Runtime; b: Runtime; close(): Promise<void>; db?: Database }>;
}

export const serverUrl = process.env.DATABASE_URL || undefined;

export function freshSchema(prefix = "t"): string {
  return `${prefix}_${randomUUID().replace(/-/g, "").slice(0, 12)}`;
}

/**
 * Drain a runtime at teardown. A run a failed test left waiting (a 10-minute retry backoff, say)
 * would keep the drain, and so the suite's afterAll, waiting until the hook times out and hides
 * the first failure: after `graceMs` what still runs is cancelled, then drained.
 */
export async function settle(rt: Runtime, graceMs = 10_000): Promise<void> {
  const drained = rt.drain();
  let timer: NodeJS.Timeout | undefined;
  const late = await Promise.race([
    drained.then(() => false),
    new Promise<boolean>((r) => (timer = setTimeout(r, graceMs, true))),
  ]);
  clearTimeout(timer);
  if (!late) return;
  await Promise.allSettled(rt.activeRuns().map((id) => rt.cancel(id, "test teardown")));
  await drained;
}

export const memoryBackend: Backend = {
  name: "memory",
  async open(opts = {}) {
    return { runtime: new Runtime({ ...opts, checkpointer: new MemorySaver() }), close: async () => undefined };
  },
  async openPair(opts = {}) {
    const checkpointer = new MemorySaver();
    const store = new MemoryRunStore();
    const a = new Runtime({ ...opts, checkpointer, store, owner: "process-a" });
    const b = new Runtime({ ...opts, checkpointer, store, owner: "process-b" });
    return { a, b, close: async () => void (await Promise.all([settle(a), settle(b)])) };
  },
};

export const postgresBackend: Backend = {
  name: serverUrl ? "postgres-server" : `postgres-embedded-${embeddedEngine()}`,
  async open(opts = {}) {
    const schema = freshSchema();
    const o = await openRuntime({ ...opts, databaseUrl: serverUrl, dataDir: ":memory:", schema, poolSize: 4 });
    return {
      runtime: o.runtime,
      schema,
      db: o.db,
      async close() {
        await settle(o.runtime);
        if (o.db.kind === "server") await o.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
        await o.close();
      },
    };
  },
  async openPair(opts = {}) {
    const schema = freshSchema();
    const o = await openRuntime({ ...opts, databaseUrl: serverUrl, dataDir: ":memory:", schema, poolSize: 6 });
    // process b shares the database's limits too (openRuntime wires them for a)
    const limitsB = new PgLimits(o.db, { owner: "process-b" });
    const b = new Runtime({
      ...opts,
      checkpointer: new PostgresSaver(o.db.pool, undefined, { schema }),
      store: new PgRunStore(o.db),
      owner: "process-b",
      limits: limitsB,
    });
    return {
      db: o.db,
      a: o.runtime,
      b,
      async close() {
        await Promise.all([settle(o.runtime), settle(b)]);
        await limitsB.close();
        if (o.db.kind === "server") await o.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
        await o.close();
      },
    };
  },
};

export const backends: Backend[] = [memoryBackend, postgresBackend];
