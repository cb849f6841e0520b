/**
 * A runtime on a database of its own for one test (a fresh schema on the server, an in-memory
 * embedded database otherwise), no QTable, no decision poll inside its runs (counts stay
 * deterministic); `closing` drops the schema and closes it whatever the test did.
 */
import type { OpenRuntimeOptions } from "../../src/runtime/open.js";
import type { Skill } from "../../src/skills/contract.js";

export async function openOwnRuntime(prefix: string, skills: Skill[] = [], extra: OpenRuntimeOptions = {}) {
  const { openRuntime } = await import("../../src/runtime/open.js");
  return openRuntime({
    databaseUrl: process.env.DATABASE_URL || "",
    dataDir: ":memory:",
    schema: `${prefix}_${Date.now().toString(36)}${Math.floor(Math.random() * 1e4)}`,
    qtable: false,
    decisionPollMs: 600_000,
    skills,
    ...extra,
  });
}
export type OwnRuntime = Awaited<ReturnType<typeof openOwnRuntime>>;

export async function closing(o: OwnRuntime, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } finally {
    if (process.env.DATABASE_URL)
      await o.db.pool.query(`DROP SCHEMA IF EXISTS "${o.db.schema}" CASCADE`).catch(() => undefined);
    await o.close();
  }
}
