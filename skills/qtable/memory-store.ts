/** In-process TableStore: for `createRuntime()` (library, tests) without a database. */
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { TASKS_TABLE, type RecordValues, type Table, type TableDefinition, type TableRecord } from "./fields.js";
import { DEFAULT_PAGE, newMessageId, newRecordId, newTableId, type OutboxMessage, type RecordPage, type TableStore, type WriteResult } from "./store.js";

interface StoredTable extends Table {
  workspaceId: string;
  records: { seq: number; rec: TableRecord }[];
}

export class MemoryTableStore implements TableStore {
  private readonly tables = new Map<string, StoredTable>();
  private readonly demo = new Map<string, string>();
  private readonly writes = new Map<string, { tableId: string; ids: string[] }>();
  private readonly outbox: (OutboxMessage & { workspaceId: string })[] = [];
  private seq = 0;

  async ensureWorkspace(workspaceId: string): Promise<Table> {
    const id = this.demo.get(workspaceId);
    if (id) return view(this.tables.get(id)!);
    // a user table may already be called "Tasks": the demo table then takes a free name
    let name = TASKS_TABLE.name;
    for (let n = 2; [...this.tables.values()].some((x) => x.workspaceId === workspaceId && x.name === name); n++) name = `${TASKS_TABLE.name} ${n}`;
    const t = this.insertTable(workspaceId, { ...TASKS_TABLE, name });
    this.demo.set(workspaceId, t.id);
    return view(t);
  }

  async listTables(workspaceId: string): Promise<Table[]> {
    return [...this.tables.values()].filter((t) => t.workspaceId === workspaceId).map(view);
  }

  async createTable(workspaceId: string, def: TableDefinition): Promise<Table> {
    if ([...this.tables.values()].some((t) => t.workspaceId === workspaceId && t.name === def.name)) {
      throw new ToolchainError(ErrorCode.TABLE_NAME_TAKEN, `a table named "${def.name}" already exists in this workspace`);
    }
    return view(this.insertTable(workspaceId, def));
  }

  async getTable(workspaceId: string, idOrName: string): Promise<Table | undefined> {
    const t = this.find(workspaceId, idOrName);
    return t ? view(t) : undefined;
  }

  async listRecords(workspaceId: string, tableId: string, page: { limit?: number; cursor?: string } = {}): Promise<RecordPage | undefined> {
    const t = this.find(workspaceId, tableId);
    if (!t) return undefined;
    const after = page.cursor ? Number(page.cursor) : 0;
    const limit = page.limit ?? DEFAULT_PAGE;
    const rows = t.records.filter((r) => r.seq > after).slice(0, limit + 1);
    const more = rows.length > limit;
    const shown = rows.slice(0, limit);
    return { records: shown.map((r) => clone(r.rec)), nextCursor: more ? String(shown.at(-1)!.seq) : null };
  }

  async createRecords(workspaceId: string, tableId: string, values: RecordValues[], idempotencyKey: string): Promise<WriteResult> {
    // no await before the key is taken: concurrent repeats see it
    if (this.writes.has(idempotencyKey)) return (await this.findWrite(idempotencyKey))!;
    const t = this.find(workspaceId, tableId);
    if (!t) throw new ToolchainError(ErrorCode.TABLE_NOT_FOUND, `table ${tableId} not found`);
    const recs = values.map((v) => ({ id: newRecordId(), values: clone(v) }));
    for (const rec of recs) t.records.push({ seq: ++this.seq, rec });
    this.writes.set(idempotencyKey, { tableId: t.id, ids: recs.map((r) => r.id) });
    return { tableId: t.id, records: recs.map(clone), created: true };
  }

  async findWrite(idempotencyKey: string): Promise<WriteResult | undefined> {
    const w = this.writes.get(idempotencyKey);
    if (!w) return undefined;
    const t = this.tables.get(w.tableId);
    const byId = new Map(t?.records.map((r) => [r.rec.id, r.rec]) ?? []);
    // records deleted since (compensated) are reported by id with the values they no longer have
    return { tableId: w.tableId, records: w.ids.map((id) => clone(byId.get(id) ?? { id, values: {} })), created: false };
  }

  async deleteRecords(tableId: string, recordIds: string[]): Promise<number> {
    const t = this.tables.get(tableId);
    if (!t) return 0;
    const ids = new Set(recordIds);
    const before = t.records.length;
    t.records = t.records.filter((r) => !ids.has(r.rec.id));
    return before - t.records.length;
  }

  async sendMessage(workspaceId: string, channel: string, message: string, idempotencyKey: string) {
    const prior = this.outbox.find((x) => x.idempotencyKey === idempotencyKey);
    if (prior) return { message: strip(prior), sent: false };
    const m = { id: newMessageId(), channel, message, idempotencyKey, createdAt: new Date().toISOString(), workspaceId };
    this.outbox.push(m);
    return { message: strip(m), sent: true };
  }

  async findMessage(idempotencyKey: string): Promise<OutboxMessage | undefined> {
    const m = this.outbox.find((x) => x.idempotencyKey === idempotencyKey);
    return m ? strip(m) : undefined;
  }

  async listMessages(workspaceId: string): Promise<OutboxMessage[]> {
    return this.outbox.filter((m) => m.workspaceId === workspaceId).map(strip);
  }

  private insertTable(workspaceId: string, def: TableDefinition): StoredTable {
    const t: StoredTable = { id: newTableId(), name: def.name, fields: clone(def.fields), workspaceId, records: [] };
    this.tables.set(t.id, t);
    return t;
  }

  private find(workspaceId: string, idOrName: string): StoredTable | undefined {
    const byId = this.tables.get(idOrName);
    if (byId) return byId.workspaceId === workspaceId ? byId : undefined;
    return [...this.tables.values()].find((t) => t.workspaceId === workspaceId && t.name === idOrName);
  }
}

const clone = <T>(x: T): T => structuredClone(x);
const view = (t: StoredTable): Table => ({ id: t.id, name: t.name, fields: clone(t.fields) });
const strip = ({ workspaceId: _w, ...m }: OutboxMessage & { workspaceId: string }): OutboxMessage => ({ ...m });
