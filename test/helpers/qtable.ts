/**
 * A runtime with the QTable pack over a store the test can see and perturb: memory, or Postgres
 * (the server at DATABASE_URL, else embedded PGlite) in a fresh schema.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { openRuntime } from "../../src/runtime/open.js";
import { createRuntime, type Runtime } from "../../src/runtime/runtime.js";
import type { Database } from "../../src/store/db.js";
import type { Skill } from "../../src/skills/contract.js";
import { MemoryTableStore } from "../../skills/qtable/memory-store.js";
import { migrateQTable, PgTableStore } from "../../skills/qtable/pg-store.js";
import { qtableSkills } from "../../skills/qtable/index.js";
import type { TableStore } from "../../skills/qtable/store.js";
import { freshSchema, serverUrl } from "./backends.js";

/** Delegates to the real store; `faults.afterWrite` runs after a write committed (e.g. throw: a lost reply). */
export class FaultyTableStore implements TableStore {
  inner!: TableStore;
  get limits() {
    return this.inner.limits;
  }
  writes = 0;
  faults: { beforeWrite?: () => Promise<void> | void; afterWrite?: (n: number) => void } = {};
  ensureWorkspace: TableStore["ensureWorkspace"] = (...a) => this.inner.ensureWorkspace(...a);
  listTables: TableStore["listTables"] = (...a) => this.inner.listTables(...a);
  createTable: TableStore["createTable"] = (...a) => this.inner.createTable(...a);
  getTable: TableStore["getTable"] = (...a) => this.inner.getTable(...a);
  listRecords: TableStore["listRecords"] = (...a) => this.inner.listRecords(...a);
  findWrite: TableStore["findWrite"] = (...a) => this.inner.findWrite(...a);
  deleteRecords: TableStore["deleteRecords"] = (...a) => this.inner.deleteRecords(...a);
  deleteWrite: TableStore["deleteWrite"] = (...a) => this.inner.deleteWrite(...a);
  sendMessage: TableStore["sendMessage"] = (...a) => this.inner.sendMessage(...a);
  findMessage: TableStore["findMessage"] = (...a) => this.inner.findMessage(...a);
  listMessages: TableStore["listMessages"] = (...a) => this.inner.listMessages(...a);
  getCalendar: TableStore["getCalendar"] = (...a) => this.inner.getCalendar(...a);
  setCalendar: TableStore["setCalendar"] = (...a) => this.inner.setCalendar(...a);
  createRecords: TableStore["createRecords"] = async (...a) => {
    await this.faults.beforeWrite?.();
    const r = await this.inner.createRecords(...a);
    if (r.created) this.writes++;
    this.faults.afterWrite?.(this.writes);
    return r;
  };
  applyWrite: TableStore["applyWrite"] = async (...a) => {
    await this.faults.beforeWrite?.();
    const r = await this.inner.applyWrite(...a);
    if (r.created) this.writes++;
    this.faults.afterWrite?.(this.writes);
    return r;
  };
}

export interface QTableRig {
  runtime: Runtime;
  store: FaultyTableStore;
  db?: Database;
  close(): Promise<void>;
}

export const qtableBackends: { name: string; open(extra?: Skill[]): Promise<QTableRig> }[] = [
  {
    name: "memory",
    async open(extra = []) {
      const store = new FaultyTableStore();
      store.inner = new MemoryTableStore();
      return {
        runtime: createRuntime({ skills: [...qtableSkills({ store }), ...extra] }),
        store,
        close: async () => undefined,
      };
    },
  },
  {
    name: serverUrl ? "postgres-server" : "postgres-embedded",
    async open(extra = []) {
      const store = new FaultyTableStore();
      const schema = freshSchema("qtc");
      const o = await openRuntime({
        databaseUrl: serverUrl,
        dataDir: ":memory:",
        schema,
        poolSize: 4,
        qtable: false,
        skills: [...qtableSkills({ store }), ...extra],
      });
      await migrateQTable(o.db);
      store.inner = new PgTableStore(o.db);
      return {
        runtime: o.runtime,
        store,
        db: o.db,
        async close() {
          await o.runtime.drain();
          if (o.db.kind === "server") await o.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
          await o.close();
        },
      };
    },
  },
];

export function approvalPlan(): any {
  return JSON.parse(readFileSync(path.resolve("examples/approval-system.plan.json"), "utf8"));
}
