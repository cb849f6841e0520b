/**
 * The test suite's shared in-memory PGlite (src/store/db.ts shareInMemoryEmbedded, switched on for
 * every test file by test/setup/shared-pglite.ts): one instance per process, a schema per open,
 * transactions of different opens never interleaved on its single session, a schema already open
 * given an instance of its own, and a closed open's schema dropped.
 */
import { describe, expect, test } from "vitest";
import { openDatabase } from "../src/store/db.js";
import { freshSchema, serverUrl } from "./helpers/backends.js";

describe.skipIf(serverUrl)("shared in-memory PGlite (tests only)", () => {
  test("two opens: one instance, own schemas; concurrent transactions queue instead of interleaving; close drops the schema", async () => {
    const [a, b] = await Promise.all([
      openDatabase({ schema: freshSchema() }),
      openDatabase({ schema: freshSchema() }),
    ]);
    try {
      expect(a.pool).toBe(b.pool);
      await a.pool.query(`CREATE SCHEMA "${a.schema}"; CREATE TABLE "${a.schema}".t (n int)`);
      // a's transaction holds the only connection across an await; b's statement waits for it
      const order: string[] = [];
      const ca = await a.pool.connect();
      await ca.query("BEGIN");
      await ca.query(`INSERT INTO "${a.schema}".t VALUES (1)`);
      const other = b.pool
        .query(`SELECT count(*)::int AS n FROM "${a.schema}".t`)
        .then((r) => (order.push("b"), r.rows[0].n));
      await new Promise((r) => setTimeout(r, 200));
      order.push("a-commit");
      await ca.query("ROLLBACK");
      ca.release();
      expect(await other).toBe(0); // b never saw a's uncommitted row
      expect(order).toEqual(["a-commit", "b"]);
    } finally {
      await a.close();
      await b.close();
    }
    const c = await openDatabase({ schema: freshSchema() });
    try {
      const { rows } = await c.pool.query("SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1", [a.schema]);
      expect(rows[0].n).toBe(0);
    } finally {
      await c.close();
    }
  });

  // the second open runs initdb in WASM: seconds of CPU, minutes on a loaded machine
  test("a schema already open in this process gets a PGlite of its own", { timeout: 180_000 }, async () => {
    const schema = freshSchema();
    const a = await openDatabase({ schema });
    const b = await openDatabase({ schema });
    try {
      expect(a.pool).not.toBe(b.pool);
      await a.pool.query(`CREATE SCHEMA "${schema}"`);
      const { rows } = await b.pool.query("SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1", [schema]);
      expect(rows[0].n).toBe(0);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
