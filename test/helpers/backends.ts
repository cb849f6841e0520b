/**
 * The backends every shared suite runs against: memory, and Postgres (the server at
 * DATABASE_URL when set, else embedded PGlite). Each Postgres runtime gets its own schema.
 */
import { randomUUID } from "node:crypto";
import { MemorySaver } from "@langchain/langgraph";
import { openRuntime } from "../../src/runtime/open.js";
import { Runtime, type RuntimeOptions } from "../../src/runtime/runtime.js";

export interface Backend {
  name: string;
  /** Fresh runtime with isolated storage; call the returned close when done. */
  open(opts?: Omit<RuntimeOptions, "checkpointer" | "store">): Promise<{ runtime: Runtime; close(): Promise<void>; schema?: string }>;
}

export const serverUrl = process.env.DATABASE_URL || undefined;

export function freshSchema(prefix = "t"): string {
  return `${prefix}_${randomUUID().replace(/-/g, "").slice(0, 12)}`;
}

export const memoryBackend: Backend = {
  name: "memory",
  async open(opts = {}) {
    return { runtime: new Runtime({ ...opts, checkpointer: new MemorySaver() }), close: async () => undefined };
  },
};

export const postgresBackend: Backend = {
  name: serverUrl ? "postgres-server" : "postgres-embedded",
  async open(opts = {}) {
    const schema = freshSchema();
    const o = await openRuntime({ ...opts, databaseUrl: serverUrl, dataDir: ":memory:", schema, poolSize: 4 });
    return {
      runtime: o.runtime,
      schema,
      async close() {
        await o.runtime.drain();
        if (o.db.kind === "server") await o.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
        await o.close();
      },
    };
  },
};

export const backends: Backend[] = [memoryBackend, postgresBackend];
