import { openDatabase } from "/work/wt-qtable/src/store/db.js";
let t0 = performance.now();
const db = await openDatabase({ schema: "x" });
console.log("open", performance.now() - t0);
t0 = performance.now();
await db.pool.query("select 1");
console.log("q", performance.now() - t0);
await db.close();
