/** In-process TableStore: for `createRuntime()` (library, tests) without a database. */
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import type { CalendarSetting } from "./calendar.js";
import { TASKS_TABLE, type RecordValues, type Table, type TableDefinition, type TableRecord } from "./fields.js";
import {
  checkDefinition,
  checkWrite,
  recordQuotaError,
  resolveTableLimits,
  tableQuotaError,
  type TableLimits,
} from "./limits.js";
import {
  DEFAULT_PAGE,
  DEFAULT_TABLE_PAGE,
  newMessageId,
  newRecordId,
  newTableId,
  parseCursor,
  type OutboxMessage,
  type PageQuery,
  type RecordPage,
  type TablePage,
  type TableStore,
  type WritePlan,
  type WriteResult,
} from "./store.js";

interface StoredTable extends Table {
  workspaceId: string;
  seq: number;
  records: { seq: number; rec: TableRecord }[];
}

export class MemoryTableStore implements TableStore {
  readonly limits: TableLimits;
  private readonly tables = new Map<string, StoredTable>();
  private readonly demo = new Map<string, string>();
  /** Writes by workspace and key: a key is only ever looked up within its workspace. */
  private readonly writes = new Map<
    string,
    { tableId: string; ids: string[]; updated: TableRecord[]; undone: boolean }
  >();
  private readonly outbox: (OutboxMessage & { workspaceId: string })[] = [];
  private readonly calendars = new Map<string, CalendarSetting>();
  private seq = 0;

  constructor(opts: { limits?: Partial<TableLimits> } = {}) {
    this.limits = resolveTableLimits(opts.limits);
  }

  async ensureWorkspace(workspaceId: string): Promise<Table> {
    const id = this.demo.get(workspaceId);
    if (id) return view(this.tables.get(id)!);
    // a user table may already be called "Tasks": the demo table then takes a free name
    let name = TASKS_TABLE.name;
    for (let n = 2; [...this.tables.values()].some((x) => x.workspaceId === workspaceId && x.name === name); n++)
      name = `${TASKS_TABLE.name} ${n}`;
    const t = this.insertTable(workspaceId, { ...TASKS_TABLE, name });
    this.demo.set(workspaceId, t.id);
    return view(t);
  }

  async listTables(workspaceId: string, page: PageQuery = {}): Promise<TablePage> {
    const after = Number(parseCursor(page.cursor));
    const limit = page.limit ?? DEFAULT_TABLE_PAGE;
    const rows = [...this.tables.values()]
      .filter((t) => t.workspaceId === workspaceId && t.seq > after)
      .slice(0, limit + 1);
    const shown = rows.slice(0, limit);
    return { tables: shown.map(view), nextCursor: rows.length > limit ? String(shown.at(-1)!.seq) : null };
  }

  async createTable(workspaceId: string, def: TableDefinition): Promise<Table> {
    checkDefinition(this.limits, def);
    const mine = [...this.tables.values()].filter((t) => t.workspaceId === workspaceId);
    if (mine.some((t) => t.name === def.name)) {
      throw new ToolchainError(
        ErrorCode.TABLE_NAME_TAKEN,
        `a table named "${def.name}" already exists in this workspace`,
      );
    }
    if (mine.length >= this.limits.tablesPerWorkspace) throw tableQuotaError(this.limits);
    return view(this.insertTable(workspaceId, def));
  }

  async getTable(workspaceId: string, idOrName: string): Promise<Table | undefined> {
    const t = this.find(workspaceId, idOrName);
    return t ? view(t) : undefined;
  }

  async listRecords(workspaceId: string, tableId: string, page: PageQuery = {}): Promise<RecordPage | undefined> {
    const after = Number(parseCursor(page.cursor));
    const t = this.find(workspaceId, tableId);
    if (!t) return undefined;
    const limit = page.limit ?? DEFAULT_PAGE;
    const rows = t.records.filter((r) => r.seq > after).slice(0, limit + 1);
    const more = rows.length > limit;
    const shown = rows.slice(0, limit);
    return { records: shown.map((r) => clone(r.rec)), nextCursor: more ? String(shown.at(-1)!.seq) : null };
  }

  async createRecords(
    workspaceId: string,
    tableId: string,
    values: RecordValues[],
    idempotencyKey: string,
  ): Promise<WriteResult> {
    return this.applyWrite(
      workspaceId,
      tableId,
      { creates: values.map((v) => ({ id: newRecordId(), values: v })), updates: [] },
      idempotencyKey,
    );
  }

  async applyWrite(
    workspaceId: string,
    tableId: string,
    plan: WritePlan,
    idempotencyKey: string,
  ): Promise<WriteResult> {
    // no await before the key is taken: concurrent repeats see it
    const key = writeKey(workspaceId, idempotencyKey);
    if (this.writes.has(key)) return (await this.findWrite(workspaceId, idempotencyKey))!;
    const t = this.find(workspaceId, tableId);
    if (!t) throw new ToolchainError(ErrorCode.TABLE_NOT_FOUND, `table ${tableId} not found`, { effectStarted: false });
    checkWrite(
      this.limits,
      [...plan.creates, ...plan.updates].map((r) => r.values),
    );
    const have = this.recordCount(workspaceId);
    if (have + plan.creates.length > this.limits.recordsPerWorkspace)
      throw recordQuotaError(this.limits, have, plan.creates.length);
    const recs = plan.creates.map((r) => ({ id: r.id, values: clone(r.values) }));
    const byId = new Map(t.records.map((r) => [r.rec.id, r.rec]));
    const before: TableRecord[] = [];
    const updated: TableRecord[] = [];
    for (const u of plan.updates) {
      const rec = byId.get(u.id);
      if (!rec) continue; // not a record of this table: never touched
      before.push(clone(rec));
      rec.values = clone(u.values);
      updated.push(clone(rec));
    }
    for (const rec of recs) t.records.push({ seq: ++this.seq, rec });
    this.writes.set(key, { tableId: t.id, ids: recs.map((r) => r.id), updated: before, undone: false });
    return { tableId: t.id, records: recs.map(clone), updated, created: true };
  }

  async findWrite(workspaceId: string, idempotencyKey: string): Promise<WriteResult | undefined> {
    const w = this.writes.get(writeKey(workspaceId, idempotencyKey));
    if (!w) return undefined;
    const t = this.tables.get(w.tableId);
    const byId = new Map(t?.records.map((r) => [r.rec.id, r.rec]) ?? []);
    // records deleted since (compensated) are reported by id with the values they no longer have
    const now = (id: string) => clone(byId.get(id) ?? { id, values: {} });
    return { tableId: w.tableId, records: w.ids.map(now), updated: w.updated.map((u) => now(u.id)), created: false };
  }

  async deleteWrite(workspaceId: string, idempotencyKey: string): Promise<number> {
    const w = this.writes.get(writeKey(workspaceId, idempotencyKey));
    if (!w || w.undone) return 0;
    w.undone = true; // before any await: a concurrent undo sees it
    let n = await this.deleteRecords(workspaceId, w.tableId, w.ids);
    const t = this.tables.get(w.tableId);
    for (const prev of w.updated) {
      const r = t?.records.find((x) => x.rec.id === prev.id);
      if (!r) continue;
      r.rec.values = clone(prev.values);
      n++;
    }
    return n;
  }

  async deleteRecords(workspaceId: string, tableId: string, recordIds: string[]): Promise<number> {
    const t = this.tables.get(tableId);
    if (!t || t.workspaceId !== workspaceId) return 0;
    const ids = new Set(recordIds);
    const before = t.records.length;
    t.records = t.records.filter((r) => !ids.has(r.rec.id));
    return before - t.records.length;
  }

  async getCalendar(workspaceId: string): Promise<CalendarSetting> {
    return clone(this.calendars.get(workspaceId) ?? {});
  }

  async setCalendar(workspaceId: string, calendar: CalendarSetting): Promise<CalendarSetting> {
    this.calendars.set(workspaceId, clone(calendar));
    return clone(calendar);
  }

  async sendMessage(workspaceId: string, channel: string, message: string, idempotencyKey: string) {
    const prior = this.outbox.find((x) => x.workspaceId === workspaceId && x.idempotencyKey === idempotencyKey);
    if (prior) return { message: strip(prior), sent: false };
    const m = {
      id: newMessageId(),
      channel,
      message,
      idempotencyKey,
      createdAt: new Date().toISOString(),
      workspaceId,
    };
    this.outbox.push(m);
    return { message: strip(m), sent: true };
  }

  async findMessage(workspaceId: string, idempotencyKey: string): Promise<OutboxMessage | undefined> {
    const m = this.outbox.find((x) => x.workspaceId === workspaceId && x.idempotencyKey === idempotencyKey);
    return m ? strip(m) : undefined;
  }

  async listMessages(workspaceId: string): Promise<OutboxMessage[]> {
    return this.outbox.filter((m) => m.workspaceId === workspaceId).map(strip);
  }

  private insertTable(workspaceId: string, def: TableDefinition): StoredTable {
    const t: StoredTable = {
      id: newTableId(),
      name: def.name,
      fields: clone(def.fields),
      workspaceId,
      seq: ++this.seq,
      records: [],
    };
    this.tables.set(t.id, t);
    return t;
  }

  private recordCount(workspaceId: string): number {
    let n = 0;
    for (const t of this.tables.values()) if (t.workspaceId === workspaceId) n += t.records.length;
    return n;
  }

  private find(workspaceId: string, idOrName: string): StoredTable | undefined {
    const byId = this.tables.get(idOrName);
    if (byId) return byId.workspaceId === workspaceId ? byId : undefined;
    return [...this.tables.values()].find((t) => t.workspaceId === workspaceId && t.name === idOrName);
  }
}

const writeKey = (workspaceId: string, key: string) => JSON.stringify([workspaceId, key]);
const clone = <T>(x: T): T => structuredClone(x);
const view = (t: StoredTable): Table => ({ id: t.id, name: t.name, fields: clone(t.fields) });
const strip = ({ workspaceId: _w, ...m }: OutboxMessage & { workspaceId: string }): OutboxMessage => ({ ...m });
