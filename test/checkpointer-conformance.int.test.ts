/**
 * LangGraph's own conformance suite for checkpointers (@langchain/langgraph-checkpoint-validation)
 * against the saver exactly as the runtime configures it (src/runtime/open.ts):
 * openDatabase → new BatchedPostgresSaver(db.pool, undefined, { schema }) → migrate(db, saver)
 * (src/store/saver.ts: LangGraph's PostgresSaver with its writes batched into one statement each).
 *
 * Backend: the server Postgres at DATABASE_URL when set, else embedded PGlite (in memory) with
 * its pool of one connection. Every checkpointer the suite creates gets its own fresh schema
 * (and, embedded, its own PGlite instance); destroying it drops the schema (server) and closes
 * the database.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, test } from "vitest";
import { validate, type CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { openDatabase, type Database } from "../src/store/db.js";
import { migrate } from "../src/store/migrations.js";
import { BatchedPostgresSaver } from "../src/store/saver.js";
import { freshSchema, serverUrl } from "./helpers/backends.js";

// The suite calls describe/it/expect/hooks as globals. Provide them for this file only (each test
// file runs in its own isolated fork), instead of enabling `globals` for the whole project.
// validate() reads them when called below, after this assignment.
Object.assign(globalThis, { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, test });

const opened = new Map<PostgresSaver, Database>();

async function createCheckpointer(): Promise<PostgresSaver> {
  const db = await openDatabase({ url: serverUrl, schema: freshSchema() });
  try {
    const saver = new BatchedPostgresSaver(db.pool, undefined, { schema: db.schema });
    await migrate(db, saver);
    opened.set(saver, db);
    return saver;
  } catch (e) {
    await db.close();
    throw e;
  }
}

async function destroyCheckpointer(saver: PostgresSaver): Promise<void> {
  const db = opened.get(saver);
  if (!db) return;
  opened.delete(saver);
  try {
    if (db.kind === "server") await db.pool.query(`DROP SCHEMA "${db.schema}" CASCADE`);
  } finally {
    await db.close();
  }
}

const initializer: CheckpointSaverTestInitializer<PostgresSaver> = {
  checkpointerName: `BatchedPostgresSaver (runtime config, ${serverUrl ? "server" : "embedded PGlite"})`,
  createCheckpointer,
  destroyCheckpointer,
  // Safety net: anything the suite created but did not destroy (e.g. a failed hook).
  async afterAll() {
    for (const saver of [...opened.keys()]) await destroyCheckpointer(saver).catch(() => undefined);
  },
};

validate(initializer);
