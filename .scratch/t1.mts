import { openDatabase } from "/work/wt-qtable/src/store/db.js";
import { PgTableStore, migrateQTable } from "/work/wt-qtable/skills/qtable/index.js";
const db = await openDatabase({});
await migrateQTable(db);
const s = new PgTableStore(db);
let t0 = performance.now();
const t = await s.ensureWorkspace("w"); console.log("ensure", performance.now() - t0);
for (let i = 0; i < 3; i++) {
  t0 = performance.now();
  await s.createRecords("w", t.id, Array.from({ length: 8 }, (_, j) => ({ title: `t${j}`, estimateDays: 2 })), `k${i}`);
  console.log("create", performance.now() - t0);
  t0 = performance.now();
  await s.getTable("w", t.id); console.log("get", performance.now() - t0);
}
await db.close();
