/**
 * The table store contract (memory: memory-store.ts, Postgres: pg-store.ts). Every call is scoped
 * by workspace: another workspace's table is indistinguishable from a missing one.
 */
import { randomBytes } from "node:crypto";
import type { RecordValues, Table, TableDefinition, TableRecord } from "./fields.js";

export interface RecordPage {
  records: TableRecord[];
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

/** What one idempotent write created (or had created before under the same key). */
export interface WriteResult {
  tableId: string;
  records: TableRecord[];
  /** false: the key had been used before; `records` are the ones that write created. */
  created: boolean;
}

export interface OutboxMessage {
  id: string;
  channel: string;
  message: string;
  idempotencyKey: string;
  createdAt: string;
}

export interface TableStore {
  /** The workspace's demo "Tasks" table, created on first call (idempotent, safe under races). */
  ensureWorkspace(workspaceId: string): Promise<Table>;
  listTables(workspaceId: string): Promise<Table[]>;
  /** Throws TABLE_NAME_TAKEN when the workspace has a table of that name. */
  createTable(workspaceId: string, def: TableDefinition): Promise<Table>;
  /** By id, or by exact name within the workspace. */
  getTable(workspaceId: string, tableIdOrName: string): Promise<Table | undefined>;
  listRecords(workspaceId: string, tableId: string, page?: { limit?: number; cursor?: string }): Promise<RecordPage | undefined>;
  /**
   * Insert records (values already validated) atomically under an idempotency key: the first call
   * writes them; every later call with the key returns what the first one created, writes nothing.
   */
  createRecords(workspaceId: string, tableId: string, values: RecordValues[], idempotencyKey: string): Promise<WriteResult>;
  /** What a write under this key created, if it happened (reconcile after a crash). */
  findWrite(idempotencyKey: string): Promise<WriteResult | undefined>;
  /** Delete exactly these records of this table (missing ones are already gone); the number deleted. */
  deleteRecords(tableId: string, recordIds: string[]): Promise<number>;
  /** Append to the notification outbox once per idempotency key (the provider reads the outbox). */
  sendMessage(workspaceId: string, channel: string, message: string, idempotencyKey: string): Promise<{ message: OutboxMessage; sent: boolean }>;
  findMessage(idempotencyKey: string): Promise<OutboxMessage | undefined>;
  listMessages(workspaceId: string): Promise<OutboxMessage[]>;
}

export const newTableId = () => `tbl_${randomBytes(8).toString("hex")}`;
export const newRecordId = () => `rec_${randomBytes(10).toString("hex")}`;
export const newMessageId = () => `msg_${randomBytes(10).toString("hex")}`;

export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 1_000;
