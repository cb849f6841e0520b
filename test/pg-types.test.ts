/**
 * The fast bytea[] parser (src/store/pg-types.ts) gives what pg's own parser gives, on arrays
 * printed by Postgres itself (both databases) and on random 1-D / 2-D arrays with NULLs.
 */
import { describe, expect, it } from "vitest";
import fc from "fast-check";
import pg from "pg";
import { openDatabase } from "../src/store/db.js";
import { parseHexByteaArray } from "../src/store/pg-types.js";
import { freshSchema, serverUrl } from "./helpers/backends.js";

const standard = (pg.types.getTypeParser as unknown as (oid: number, format: string) => (v: string) => unknown)(
  1001,
  "text",
);
const hex = (b: Uint8Array | null) => (b === null ? "NULL" : `"\\\\x${Buffer.from(b).toString("hex")}"`);

describe("bytea[] parser", () => {
  it("matches pg's parser on random 1-D and 2-D hex arrays", () => {
    const elem = fc.option(fc.uint8Array({ maxLength: 40 }), { nil: null });
    fc.assert(
      fc.property(
        fc.array(elem, { maxLength: 8 }),
        fc.array(fc.array(elem, { minLength: 3, maxLength: 3 }), { maxLength: 6 }),
        (one, two) => {
          const s1 = `{${one.map(hex).join(",")}}`;
          const s2 = `{${two.map((r) => `{${r.map(hex).join(",")}}`).join(",")}}`;
          expect(parseHexByteaArray(s1)).toEqual(standard(s1));
          if (two.length) expect(parseHexByteaArray(s2)).toEqual(standard(s2));
        },
      ),
    );
  });

  it("leaves other formats to pg's parser", () => {
    expect(parseHexByteaArray('{"abc"}')).toBeUndefined();
    expect(parseHexByteaArray("{{")).toBeUndefined();
  });

  it("reads what the database prints, through the project's pool", async () => {
    const db = await openDatabase({ url: serverUrl, schema: freshSchema() });
    try {
      const { rows } = await db.pool.query(
        `SELECT array_agg(array[x.a::bytea, x.b]) AS v FROM (VALUES ('ch'::text, '\\x00ff10'::bytea), ('t', NULL), ('', ''::bytea)) AS x(a, b)`,
      );
      expect(rows[0].v).toEqual([
        [Buffer.from("ch"), Buffer.from([0, 255, 16])],
        [Buffer.from("t"), null],
        [Buffer.from(""), Buffer.from("")],
      ]);
    } finally {
      if (db.kind === "server")
        await db.pool.query(`DROP SCHEMA IF EXISTS "${db.schema}" CASCADE`).catch(() => undefined);
      await db.close();
    }
  });
});
