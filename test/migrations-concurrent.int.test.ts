/**
 * Several processes starting at once on an empty schema of a server Postgres (replicas of one
 * deployment): every migration, the QTable pack's tables and LangGraph's checkpoint tables are
 * applied once, and every process comes up and runs. (The embedded database belongs to one process.)
 */
import { describe, expect, test } from "vitest";
import pg from "pg";
import { freshSchema, serverUrl } from "./helpers/backends.js";
import { spawnChild } from "./helpers/child.js";

describe.runIf(serverUrl)("migrations started by several processes at once", () => {
  test("six processes on one empty schema: all start and run, each version recorded once", async () => {
    const schema = freshSchema("mig");
    const storage = { env: { DATABASE_URL: serverUrl!, TOOLCHAIN_SCHEMA: schema }, schema };
    const children = Array.from({ length: 6 }, () => spawnChild(storage, [], {}, "test/fixtures/migrate-child.ts"));
    const codes = await Promise.all(children.map((c) => c.exited));
    const outs = children.map((c) => c.lines[0] as { ok: boolean; status?: string; error?: string } | undefined);
    expect(outs.map((o, i) => (o?.ok ? o.status : `${o?.error ?? ""}${children[i]!.stderr()}`))).toEqual(
      Array(6).fill("completed"),
    );
    expect(codes).toEqual(Array(6).fill(0));
    const c = new pg.Client({ connectionString: serverUrl });
    await c.connect();
    try {
      const { rows } = await c.query(
        `SELECT version, count(*)::int AS n FROM "${schema}".toolchain_migrations GROUP BY version ORDER BY version`,
      );
      expect(rows.length).toBeGreaterThan(0);
      expect(rows.every((r) => r.n === 1)).toBe(true);
      expect(rows.map((r) => r.version)).toEqual(rows.map((_, i) => i));
      const runs = await c.query(`SELECT count(*)::int AS n FROM "${schema}".tool_chain_runs`);
      expect(runs.rows[0].n).toBe(6);
    } finally {
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
      await c.end();
    }
  }, 180_000);
});
