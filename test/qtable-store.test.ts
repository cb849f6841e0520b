/**
 * The TableStore contract, one suite for every backend: memory, and Postgres (the server at
 * DATABASE_URL, else embedded PGlite), each Postgres run in a fresh schema.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { openDatabase, type Database } from "../src/store/db.js";
import { MemoryTableStore } from "../skills/qtable/memory-store.js";
import { migrateQTable, PgTableStore } from "../skills/qtable/pg-store.js";
import { TASKS_TABLE } from "../skills/qtable/fields.js";
import type { TableStore } from "../skills/qtable/store.js";
import { freshSchema, serverUrl } from "./helpers/backends.js";

interface Opened {
  store: TableStore;
  close(): Promise<void>;
}
const stores: { name: string; open(): Promise<Opened> }[] = [
  { name: "memory", open: async () => ({ store: new MemoryTableStore(), close: async () => undefined }) },
  {
    name: serverUrl ? "postgres-server" : "postgres-embedded",
    async open() {
      const schema = freshSchema("qt");
      const db: Database = await openDatabase({ url: serverUrl, schema, poolSize: 4 });
      await migrateQTable(db);
      await migrateQTable(db); // applying twice is a no-op
      return {
        store: new PgTableStore(db),
        async close() {
          if (db.kind === "server") await db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
          await db.close();
        },
      };
    },
  },
];

describe.each(stores)("TableStore on $name", ({ open }) => {
  let o: Opened;
  let s: TableStore;
  beforeAll(async () => {
    o = await open();
    s = o.store;
  });
  afterAll(() => o?.close());

  test("every workspace gets one demo Tasks table, also when asked concurrently", async () => {
    const all = await Promise.all([s.ensureWorkspace("ws1"), s.ensureWorkspace("ws1"), s.ensureWorkspace("ws1")]);
    expect(new Set(all.map((t) => t.id)).size).toBe(1);
    expect(all[0]).toMatchObject({ name: "Tasks", fields: TASKS_TABLE.fields });
    expect(await s.listTables("ws1")).toEqual([all[0]]);
    const other = await s.ensureWorkspace("ws2");
    expect(other.id).not.toBe(all[0]!.id);
  });

  test("tables are scoped by workspace: another workspace's table is missing; lookup by id or name", async () => {
    const t = await s.createTable("ws1", { name: "Risks", fields: [{ name: "title", type: "text", required: true }, { name: "level", type: "select", options: ["low", "high"] }] });
    expect(t.id).toMatch(/^tbl_/);
    expect(await s.getTable("ws1", t.id)).toEqual(t);
    expect(await s.getTable("ws1", "Risks")).toEqual(t);
    expect(await s.getTable("ws2", t.id)).toBeUndefined();
    expect(await s.getTable("ws2", "Risks")).toBeUndefined();
    expect(await s.listRecords("ws2", t.id)).toBeUndefined();
    await expect(s.createTable("ws1", { name: "Risks", fields: [{ name: "x", type: "text" }] })).rejects.toMatchObject({ code: "TABLE_NAME_TAKEN" });
    expect((await s.createTable("ws2", { name: "Risks", fields: [{ name: "x", type: "text" }] })).id).not.toBe(t.id);
    await expect(s.createRecords("ws2", t.id, [{ title: "x" }], "k-foreign")).rejects.toMatchObject({ code: "TABLE_NOT_FOUND" });
    expect(await s.findWrite("k-foreign")).toBeUndefined();
  });

  test("a write is atomic and happens once per idempotency key, also under concurrent repeats", async () => {
    const t = await s.createTable("ws1", { name: "Once", fields: [{ name: "title", type: "text" }] });
    const vals = [{ title: "a" }, { title: "b" }, { title: "c" }];
    const results = await Promise.all([1, 2, 3, 4].map(() => s.createRecords("ws1", t.id, vals, "run-1:create")));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const ids = results[0]!.records.map((r) => r.id);
    for (const r of results) expect(r.records.map((x) => x.id)).toEqual(ids);
    const page = (await s.listRecords("ws1", t.id))!;
    expect(page.records.map((r) => r.values.title)).toEqual(["a", "b", "c"]);
    expect(page.records.map((r) => r.id)).toEqual(ids);
    expect(await s.findWrite("run-1:create")).toEqual({ tableId: t.id, records: page.records, created: false });
    // a different key writes a second set
    expect((await s.createRecords("ws1", t.id, vals, "run-2:create")).created).toBe(true);
    expect((await s.listRecords("ws1", t.id))!.records).toHaveLength(6);
  });

  test("delete removes exactly the given records, and is idempotent", async () => {
    const t = await s.createTable("ws1", { name: "Del", fields: [{ name: "title", type: "text" }] });
    const keep = await s.createRecords("ws1", t.id, [{ title: "keep" }], "keep");
    const w = await s.createRecords("ws1", t.id, [{ title: "x" }, { title: "y" }], "del");
    expect(await s.deleteRecords(t.id, w.records.map((r) => r.id))).toBe(2);
    expect(await s.deleteRecords(t.id, w.records.map((r) => r.id))).toBe(0);
    expect(await s.deleteRecords("tbl_other", keep.records.map((r) => r.id))).toBe(0); // the table must match
    expect((await s.listRecords("ws1", t.id))!.records.map((r) => r.values.title)).toEqual(["keep"]);
  });

  test("records page in insertion order", async () => {
    const t = await s.createTable("ws1", { name: "Paged", fields: [{ name: "n", type: "number" }] });
    await s.createRecords("ws1", t.id, Array.from({ length: 7 }, (_, i) => ({ n: i })), "paged");
    const seen: number[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const p = (await s.listRecords("ws1", t.id, { limit: 3, cursor }))!;
      seen.push(...p.records.map((r) => r.values.n as number));
      cursor = p.nextCursor ?? undefined;
      pages++;
    } while (cursor);
    expect(seen).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(pages).toBe(3);
  });

  test("the outbox takes a message once per idempotency key", async () => {
    const a = await s.sendMessage("ws1", "#approvals", "hello", "r:notify");
    const b = await s.sendMessage("ws1", "#approvals", "hello", "r:notify");
    expect([a.sent, b.sent]).toEqual([true, false]);
    expect(b.message).toEqual(a.message);
    expect(await s.findMessage("r:notify")).toEqual(a.message);
    expect(await s.listMessages("ws1")).toEqual([a.message]);
    expect(await s.listMessages("ws2")).toEqual([]);
  });
});
