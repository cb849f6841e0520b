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
import type { TableLimits } from "../skills/qtable/limits.js";
import { freshSchema, serverUrl } from "./helpers/backends.js";

interface Opened {
  store: TableStore;
  close(): Promise<void>;
}
const stores: { name: string; open(limits?: Partial<TableLimits>): Promise<Opened> }[] = [
  {
    name: "memory",
    open: async (limits) => ({ store: new MemoryTableStore({ limits }), close: async () => undefined }),
  },
  {
    name: serverUrl ? "postgres-server" : "postgres-embedded",
    async open(limits) {
      const schema = freshSchema("qt");
      const db: Database = await openDatabase({ url: serverUrl, schema, poolSize: 4 });
      await migrateQTable(db);
      await migrateQTable(db); // applying twice is a no-op
      return {
        store: new PgTableStore(db, { limits }),
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
    expect(await s.listTables("ws1")).toEqual({ tables: [all[0]], nextCursor: null });
    const other = await s.ensureWorkspace("ws2");
    expect(other.id).not.toBe(all[0]!.id);
  });

  test("tables are scoped by workspace: another workspace's table is missing; lookup by id or name", async () => {
    const t = await s.createTable("ws1", {
      name: "Risks",
      fields: [
        { name: "title", type: "text", required: true },
        { name: "level", type: "select", options: ["low", "high"] },
      ],
    });
    expect(t.id).toMatch(/^tbl_/);
    expect(await s.getTable("ws1", t.id)).toEqual(t);
    expect(await s.getTable("ws1", "Risks")).toEqual(t);
    expect(await s.getTable("ws2", t.id)).toBeUndefined();
    expect(await s.getTable("ws2", "Risks")).toBeUndefined();
    expect(await s.listRecords("ws2", t.id)).toBeUndefined();
    await expect(s.createTable("ws1", { name: "Risks", fields: [{ name: "x", type: "text" }] })).rejects.toMatchObject({
      code: "TABLE_NAME_TAKEN",
    });
    expect((await s.createTable("ws2", { name: "Risks", fields: [{ name: "x", type: "text" }] })).id).not.toBe(t.id);
    await expect(s.createRecords("ws2", t.id, [{ title: "x" }], "k-foreign")).rejects.toMatchObject({
      code: "TABLE_NOT_FOUND",
    });
    expect(await s.findWrite("ws2", "k-foreign")).toBeUndefined();
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
    expect(await s.findWrite("ws1", "run-1:create")).toEqual({
      tableId: t.id,
      records: page.records,
      updated: [],
      created: false,
    });
    // a different key writes a second set
    expect((await s.createRecords("ws1", t.id, vals, "run-2:create")).created).toBe(true);
    expect((await s.listRecords("ws1", t.id))!.records).toHaveLength(6);
  });

  test("a write that updates: the undo restores the previous values and deletes what it created, once, only in its workspace", async () => {
    const t = await s.createTable("wsU", {
      name: "Upd",
      fields: [
        { name: "title", type: "text" },
        { name: "n", type: "number" },
      ],
    });
    const first = await s.createRecords(
      "wsU",
      t.id,
      [
        { title: "a", n: 1 },
        { title: "b", n: 2 },
      ],
      "plan-1",
    );
    const [a, b] = first.records;
    const w = await s.applyWrite(
      "wsU",
      t.id,
      {
        creates: [{ id: "rec_new_c_0000000000", values: { title: "c", n: 3 } }],
        updates: [
          { id: a!.id, values: { title: "a", n: 10 } },
          { id: "rec_not_in_this_table", values: { title: "x" } },
        ],
      },
      "plan-2",
    );
    expect(w).toEqual({
      tableId: t.id,
      records: [{ id: "rec_new_c_0000000000", values: { title: "c", n: 3 } }],
      updated: [{ id: a!.id, values: { title: "a", n: 10 } }],
      created: true,
    });
    // repeated under its key: the same write, nothing applied again
    expect(
      await s.applyWrite(
        "wsU",
        t.id,
        { creates: [{ id: "rec_other_000000000000", values: { title: "z" } }], updates: [] },
        "plan-2",
      ),
    ).toEqual({ ...w, created: false });
    const now = async () => (await s.listRecords("wsU", t.id))!.records.map((r) => r.values);
    expect(await now()).toEqual([
      { title: "a", n: 10 },
      { title: "b", n: 2 },
      { title: "c", n: 3 },
    ]);
    // another workspace's undo under the same key touches nothing
    expect(await s.deleteWrite("wsOther", "plan-2")).toBe(0);
    expect(await now()).toHaveLength(3);
    expect(await Promise.all([s.deleteWrite("wsU", "plan-2"), s.deleteWrite("wsU", "plan-2")])).toEqual(
      expect.arrayContaining([2, 0]),
    );
    expect(await now()).toEqual([
      { title: "a", n: 1 },
      { title: "b", n: 2 },
    ]);
    // undone once: a later change is not overwritten by a repeated undo
    await s.applyWrite("wsU", t.id, { creates: [], updates: [{ id: b!.id, values: { title: "b", n: 20 } }] }, "plan-3");
    expect(await s.deleteWrite("wsU", "plan-2")).toBe(0);
    expect(await now()).toEqual([
      { title: "a", n: 1 },
      { title: "b", n: 20 },
    ]);
  });

  test("delete removes exactly the given records, and is idempotent", async () => {
    const t = await s.createTable("ws1", { name: "Del", fields: [{ name: "title", type: "text" }] });
    const keep = await s.createRecords("ws1", t.id, [{ title: "keep" }], "keep");
    const w = await s.createRecords("ws1", t.id, [{ title: "x" }, { title: "y" }], "del");
    expect(
      await s.deleteRecords(
        "ws1",
        t.id,
        w.records.map((r) => r.id),
      ),
    ).toBe(2);
    expect(
      await s.deleteRecords(
        "ws1",
        t.id,
        w.records.map((r) => r.id),
      ),
    ).toBe(0);
    expect(
      await s.deleteRecords(
        "ws1",
        "tbl_other",
        keep.records.map((r) => r.id),
      ),
    ).toBe(0); // the table must match
    expect((await s.listRecords("ws1", t.id))!.records.map((r) => r.values.title)).toEqual(["keep"]);
  });

  test("records page in insertion order", async () => {
    const t = await s.createTable("ws1", { name: "Paged", fields: [{ name: "n", type: "number" }] });
    await s.createRecords(
      "ws1",
      t.id,
      Array.from({ length: 7 }, (_, i) => ({ n: i })),
      "paged",
    );
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
    expect(await s.findMessage("ws1", "r:notify")).toEqual(a.message);
    expect(await s.listMessages("ws1")).toEqual([a.message]);
    expect(await s.listMessages("ws2")).toEqual([]);
  });

  test("a workspace's stored calendar: {} until set, replaced whole, only its own", async () => {
    expect(await s.getCalendar("cal-a")).toEqual({});
    await s.setCalendar("cal-a", { locale: "GB", holidays: ["2027-01-04"] });
    expect(await s.getCalendar("cal-a")).toEqual({ locale: "GB", holidays: ["2027-01-04"] });
    await s.setCalendar("cal-a", { workdays: [1, 2, 3] });
    expect(await s.getCalendar("cal-a")).toEqual({ workdays: [1, 2, 3] });
    expect(await s.getCalendar("cal-b")).toEqual({});
  });

  test("isolation: every method given another workspace's ids reads, changes and deletes nothing", async () => {
    // workspace A's data: a table, records under a write key, a message under a key
    const tA = await s.createTable("wsA", { name: "Secrets", fields: [{ name: "title", type: "text" }] });
    const wA = await s.createRecords("wsA", tA.id, [{ title: "a1" }, { title: "a2" }], "runA:create");
    const mA = await s.sendMessage("wsA", "#a", "for A", "runA:notify");
    const ids = wA.records.map((r) => r.id);
    const snapshot = async () => ({
      table: await s.getTable("wsA", tA.id),
      records: (await s.listRecords("wsA", tA.id))!.records,
      write: await s.findWrite("wsA", "runA:create"),
      message: await s.findMessage("wsA", "runA:notify"),
      messages: await s.listMessages("wsA"),
      tables: (await s.listTables("wsA")).tables,
    });
    const before = await snapshot();
    // workspace C knows every id and key of A, and tries each method with them
    await s.ensureWorkspace("wsC");
    expect(await s.getTable("wsC", tA.id)).toBeUndefined();
    expect(await s.getTable("wsC", "Secrets")).toBeUndefined();
    expect((await s.listTables("wsC")).tables.map((t) => t.id)).not.toContain(tA.id);
    expect(await s.listRecords("wsC", tA.id)).toBeUndefined();
    await expect(s.createRecords("wsC", tA.id, [{ title: "planted" }], "runC:create")).rejects.toMatchObject({
      code: "TABLE_NOT_FOUND",
    });
    expect(await s.findWrite("wsC", "runA:create")).toBeUndefined();
    expect(await s.deleteWrite("wsC", "runA:create")).toBe(0);
    expect(await s.deleteRecords("wsC", tA.id, ids)).toBe(0);
    expect(await s.findMessage("wsC", "runA:notify")).toBeUndefined();
    expect(await s.listMessages("wsC")).toEqual([]);
    // C reusing A's key writes C's own (keys are per workspace), and A's write is untouched
    const tC = await s.createTable("wsC", { name: "Secrets", fields: [{ name: "title", type: "text" }] });
    const wC = await s.createRecords("wsC", tC.id, [{ title: "c1" }], "runA:create");
    expect(wC).toMatchObject({ tableId: tC.id, created: true });
    expect((await s.sendMessage("wsC", "#c", "for C", "runA:notify")).sent).toBe(true);
    expect(await s.findMessage("wsA", "runA:notify")).toEqual(mA.message);
    expect(await s.deleteWrite("wsC", "runA:create")).toBe(1);
    expect(await snapshot()).toEqual(before);
    expect(before.records.map((r) => r.id)).toEqual(ids);
    // and the owner's own undo works
    expect(await s.deleteWrite("wsA", "runA:create")).toBe(2);
    expect(await s.deleteWrite("wsA", "runA:create")).toBe(0);
    expect((await s.listRecords("wsA", tA.id))!.records).toEqual([]);
  });

  test("tables page in creation order with a keyset cursor; a cursor no page returned is INVALID_QUERY", async () => {
    for (let i = 0; i < 5; i++) await s.createTable("wsP", { name: `T${i}`, fields: [{ name: "x", type: "text" }] });
    const names: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const p = await s.listTables("wsP", { limit: 2, cursor });
      names.push(...p.tables.map((t) => t.name));
      cursor = p.nextCursor ?? undefined;
      pages++;
    } while (cursor);
    expect([names, pages]).toEqual([["T0", "T1", "T2", "T3", "T4"], 3]);
    for (const bad of ["9223372036854775808", "99999999999999999999", "-1", "x", "1\u0000"]) {
      await expect(s.listTables("wsP", { cursor: bad })).rejects.toMatchObject({ code: "INVALID_QUERY" });
      await expect(s.listRecords("wsP", "T0", { cursor: bad })).rejects.toMatchObject({ code: "INVALID_QUERY" });
    }
    expect((await s.listTables("wsP", { cursor: "9223372036854775807" })).tables).toEqual([]);
  });
});

describe.each(stores)("TableStore bounds on $name", ({ open }) => {
  let o: Opened;
  let s: TableStore;
  beforeAll(async () => {
    o = await open({
      tablesPerWorkspace: 3,
      recordsPerWorkspace: 5,
      fieldsPerTable: 4,
      tableDefinitionBytes: 400,
      writeBytes: 200,
    });
    s = o.store;
  });
  afterAll(() => o?.close());
  const fields = [{ name: "title", type: "text" as const }];

  test("a workspace's table quota (the demo table counts); other workspaces are not affected", async () => {
    await s.ensureWorkspace("q1");
    await s.createTable("q1", { name: "A", fields });
    await s.createTable("q1", { name: "B", fields });
    await expect(s.createTable("q1", { name: "C", fields })).rejects.toMatchObject({
      code: "QUOTA_EXCEEDED",
      details: { quota: "tables", limit: 3 },
    });
    // concurrent creates cannot pass the quota together
    const r = await Promise.allSettled([1, 2, 3, 4].map((i) => s.createTable("q2", { name: `T${i}`, fields })));
    expect(r.filter((x) => x.status === "fulfilled")).toHaveLength(3);
    expect((await s.listTables("q2")).tables).toHaveLength(3);
    expect((await s.createTable("q3", { name: "A", fields })).name).toBe("A");
  });

  test("a workspace's record quota counts every table; a refused write writes nothing", async () => {
    const a = await s.createTable("r1", { name: "A", fields });
    const b = await s.createTable("r1", { name: "B", fields });
    await s.createRecords("r1", a.id, [{ title: "1" }, { title: "2" }, { title: "3" }], "k1");
    await expect(
      s.createRecords("r1", b.id, [{ title: "4" }, { title: "5" }, { title: "6" }], "k2"),
    ).rejects.toMatchObject({ code: "QUOTA_EXCEEDED", details: { quota: "records", limit: 5, have: 3, adding: 3 } });
    expect(await s.findWrite("r1", "k2")).toBeUndefined();
    expect((await s.createRecords("r1", b.id, [{ title: "4" }, { title: "5" }], "k2")).created).toBe(true);
    // deleting frees quota
    expect(await s.deleteWrite("r1", "k1")).toBe(3);
    expect((await s.createRecords("r1", a.id, [{ title: "7" }], "k3")).created).toBe(true);
  });

  test("field count, definition bytes and write bytes are bounded: VALUE_TOO_LARGE naming the field", async () => {
    const many = Array.from({ length: 5 }, (_, i) => ({ name: `f${i}`, type: "text" as const }));
    await expect(s.createTable("b1", { name: "Wide", fields: many })).rejects.toMatchObject({
      code: "VALUE_TOO_LARGE",
      message: "fields: a table has at most 4 fields, got 5",
    });
    const big = [
      {
        name: "s",
        type: "select" as const,
        options: Array.from({ length: 20 }, (_, i) => `option-${i}-${"x".repeat(20)}`),
      },
    ];
    await expect(s.createTable("b1", { name: "Big", fields: big })).rejects.toMatchObject({
      code: "VALUE_TOO_LARGE",
      details: { field: "fields", limit: 400 },
    });
    const t = await s.createTable("b1", { name: "Ok", fields });
    // two records, few by count, over the byte bound
    await expect(
      s.createRecords("b1", t.id, [{ title: "x".repeat(120) }, { title: "y".repeat(120) }], "big"),
    ).rejects.toMatchObject({ code: "VALUE_TOO_LARGE", details: { field: "records", limit: 200 } });
    expect((await s.listRecords("b1", t.id))!.records).toEqual([]);
  });
});
