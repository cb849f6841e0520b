/**
 * Named prepared statements (src/store/prepared.ts), on the database this suite runs against
 * (server Postgres at DATABASE_URL, else the embedded default): a run's statements are prepared
 * once per connection and reused, not once per run; TOOLCHAIN_PG_PREPARED=0 turns them off; a
 * refused statement leaves its name usable; a plan gone stale under a migration is sent unnamed;
 * a replaced connection (PGlite keeps one session for
 * every client) prepares under names of its own; a connection names a bounded number of texts.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type pg from "pg";
import { openRuntime, type OpenedRuntime } from "../src/runtime/open.js";
import { MAX_NAMED } from "../src/store/prepared.js";
import { freshSchema, serverUrl } from "./helpers/backends.js";

const plan = { steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: 1 } }] };
let opened: OpenedRuntime | undefined;
let dir: string | undefined;

/**
 * One connection, so every statement and pg_prepared_statements share one session; on the
 * embedded default a database of its own: the test processes share one in-memory PGlite pool
 * between files (isolate false), whose one connection has named other files' texts (CI saw its
 * bound reached by them).
 */
async function open(): Promise<OpenedRuntime> {
  dir = serverUrl ? undefined : mkdtempSync(join(tmpdir(), "prep-"));
  opened = await openRuntime({
    databaseUrl: serverUrl,
    dataDir: dir ? join(dir, "db") : ":memory:",
    schema: freshSchema("prep"),
    poolSize: 1,
    qtable: false,
  });
  return opened;
}

afterEach(async () => {
  const o = opened;
  opened = undefined;
  if (o) {
    await o.runtime.drain();
    if (o.db.kind === "server")
      await o.db.pool.query(`DROP SCHEMA IF EXISTS "${o.db.schema}" CASCADE`).catch(() => undefined);
    await o.close();
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** Prepared statements of this session that touch this schema: name → text. */
async function prepared(o: OpenedRuntime): Promise<Map<string, string>> {
  const { rows } = await o.db.pool.query<{ name: string; statement: string }>(
    `SELECT name, statement FROM pg_prepared_statements WHERE strpos(statement, $1) > 0`,
    [`"${o.db.schema}"`],
  );
  return new Map(rows.map((r) => [r.name, r.statement]));
}

describe("prepared statements", () => {
  it("TOOLCHAIN_PG_PREPARED=0 sends every statement unnamed", async () => {
    process.env.TOOLCHAIN_PG_PREPARED = "0";
    try {
      const o = await open();
      expect((await o.runtime.run(plan).result).status).toBe("completed");
      expect((await prepared(o)).size).toBe(0);
    } finally {
      delete process.env.TOOLCHAIN_PG_PREPARED;
    }
  });

  it("prepares a run's statements once per connection and reuses them on the next runs", async () => {
    const o = await open();
    expect((await o.runtime.run(plan).result).status).toBe("completed");
    const first = await prepared(o);
    const texts = [...first.values()].join("\n");
    // the run row, a checkpoint with its blobs, a task's writes, the run's sync
    expect(texts).toContain("tool_chain_runs");
    expect(texts).toContain("checkpoint_blobs");
    expect(texts).toContain("checkpoint_writes");
    for (const name of first.keys()) expect(name).toMatch(/^tc\d+_[0-9a-f]{20}$/);
    for (let i = 0; i < 5; i++) expect((await o.runtime.run(plan).result).status).toBe("completed");
    // five more runs add no statement: each text is parsed once, then only bound and executed
    expect([...(await prepared(o)).keys()].sort()).toEqual([...first.keys()].sort());
  });

  it("a statement refused at parse or at execution leaves the connection and the name usable", async () => {
    const o = await open();
    const q = (sql: string, v: unknown[]) => o.db.pool.query(sql, v);
    await expect(q(`SELEC $1::int`, [1])).rejects.toThrow(/syntax/);
    const div = `SELECT 10 / $1::int AS v FROM "${o.db.schema}".tool_chain_runs RIGHT JOIN (SELECT 1) AS one ON false`;
    await expect(q(div, [0])).rejects.toThrow(/division by zero/);
    expect((await q(div, [5])).rows).toEqual([{ v: 2 }]);
    expect((await q(div, [2])).rows).toEqual([{ v: 5 }]);
    expect((await o.runtime.run(plan).result).status).toBe("completed");
  });

  it("a replaced connection prepares the same texts under names of its own", async () => {
    const o = await open();
    expect((await o.runtime.run(plan).result).status).toBe("completed");
    const before = await prepared(o);
    // the pool's one connection dies; its successor must not collide with names PGlite's one
    // session still holds (on a server the old session is gone with its names)
    const client: pg.PoolClient = await o.db.pool.connect();
    client.release(true);
    expect((await o.runtime.run(plan).result).status).toBe("completed");
    const after = await prepared(o);
    const prefixes = (m: Map<string, string>) => new Set([...m.keys()].map((k) => k.split("_")[0]));
    const fresh = [...after.keys()].filter((k) => !before.has(k));
    expect(fresh.length).toBeGreaterThan(0);
    for (const p of prefixes(new Map(fresh.map((k) => [k, ""])))) expect(prefixes(before).has(p)).toBe(false);
    if (o.db.kind === "server") expect(fresh.length).toBe(after.size);
  });

  it("a plan gone stale under a migration (a column added under SELECT *) is sent unnamed, outside a transaction at once", async () => {
    const o = await open();
    const t = `"${o.db.schema}".stale_probe`;
    await o.db.pool.query(`CREATE TABLE ${t} (a int)`);
    await o.db.pool.query(`INSERT INTO ${t} VALUES (1)`);
    const select = `SELECT * FROM ${t} WHERE a = $1`;
    expect((await o.db.pool.query(select, [1])).rows).toEqual([{ a: 1 }]);
    await o.db.pool.query(`ALTER TABLE ${t} ADD COLUMN b int`);
    // the prepared plan is refused from now on ("cached plan must not change result type")
    expect((await o.db.pool.query(select, [1])).rows).toEqual([{ a: 1, b: null }]);
    expect((await o.db.pool.query(select, [1])).rows).toEqual([{ a: 1, b: null }]);
    // inside a transaction the refusal loses the transaction (it is not retried there); the
    // text is unnamed for the next one
    const tx = `SELECT * FROM ${t} WHERE a = $1 AND true`;
    expect((await o.db.pool.query(tx, [1])).rows).toEqual([{ a: 1, b: null }]);
    await o.db.pool.query(`ALTER TABLE ${t} ADD COLUMN c int`);
    const client = await o.db.pool.connect();
    try {
      await client.query("BEGIN");
      await expect(client.query(tx, [1])).rejects.toThrow(/cached plan must not change result type/);
      await client.query("ROLLBACK");
      await client.query("BEGIN");
      expect((await client.query(tx, [1])).rows).toEqual([{ a: 1, b: null, c: null }]);
      await client.query("COMMIT");
    } finally {
      client.release();
    }
  });

  it(`names at most ${MAX_NAMED} distinct texts on a connection; the others still run, unnamed`, async () => {
    const o = await open();
    expect((await o.runtime.run(plan).result).status).toBe("completed");
    const tag = `/* probe ${o.db.schema} */`;
    for (let k = 0; k < MAX_NAMED + 40; k++) {
      const { rows } = await o.db.pool.query(`SELECT $1::int + ${k} AS v ${tag}`, [1]);
      expect(rows[0].v).toBe(1 + k);
    }
    const { rows } = await o.db.pool.query<{ name: string; probe: boolean }>(
      `SELECT name, strpos(statement, $1) > 0 AS probe FROM pg_prepared_statements`,
      [tag],
    );
    const probes = rows.filter((r) => r.probe);
    const prefix = probes[0]!.name.split("_")[0]!;
    // the run's statements took some of the connection's names, the probes the rest up to the
    // bound; the 40 past it ran unnamed, and were answered
    expect(rows.filter((r) => r.name.startsWith(prefix + "_")).length).toBe(MAX_NAMED);
    expect(probes.length).toBeLessThan(MAX_NAMED);
    expect(probes.length).toBeGreaterThan(MAX_NAMED - 40);
  });
});
