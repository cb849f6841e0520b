/**
 * The table store contract (memory: memory-store.ts, Postgres: pg-store.ts). Every call is scoped
 * by workspace: another workspace's table is indistinguishable from a missing one.
 */
import { randomBytes } from "node:crypto";
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import type { RecordValues, Table, TableDefinition, TableRecord } from "./fields.js";
import type { TableLimits } from "./limits.js";
import type { CalendarSetting } from "./calendar.js";

export interface RecordPage {
  records: TableRecord[];
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

/** What one idempotent write created and updated (or had, before, under the same key). */
export interface WriteResult {
  tableId: string;
  /** The records the write created (current values; `{}` once undone). */
  records: TableRecord[];
  /** The existing records the write overwrote (current values). */
  updated: TableRecord[];
  /** false: the key had been used before; `records` / `updated` are that write's. */
  created: boolean;
}

/** One write: new records (ids from newRecordId, so relations can name them) and overwrites of existing ones. */
export interface WritePlan {
  creates: TableRecord[];
  /** Records of this table in this workspace; ids that are not are skipped. Their previous values are kept for the undo. */
  updates: TableRecord[];
}

export interface OutboxMessage {
  id: string;
  channel: string;
  message: string;
  idempotencyKey: string;
  createdAt: string;
}

export interface TablePage {
  tables: Table[];
  /** Pass as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

export interface PageQuery {
  limit?: number;
  /** A `nextCursor` this store returned (a decimal sequence number). */
  cursor?: string;
}

/**
 * Every method takes the workspace and reads, changes or deletes only that workspace's data: an
 * id (table, record, idempotency key) of another workspace behaves like one that does not exist.
 */
export interface TableStore {
  readonly limits: TableLimits;
  /** The workspace's demo "Tasks" table, created on first call (idempotent, safe under races). */
  ensureWorkspace(workspaceId: string): Promise<Table>;
  /** In creation order, keyset-paginated. */
  listTables(workspaceId: string, page?: PageQuery): Promise<TablePage>;
  /** Throws TABLE_NAME_TAKEN when the workspace has a table of that name, QUOTA_EXCEEDED at its table quota, VALUE_TOO_LARGE over the definition bounds. */
  createTable(workspaceId: string, def: TableDefinition): Promise<Table>;
  /** By id, or by exact name within the workspace. */
  getTable(workspaceId: string, tableIdOrName: string): Promise<Table | undefined>;
  listRecords(workspaceId: string, tableId: string, page?: PageQuery): Promise<RecordPage | undefined>;
  /**
   * Insert records (values already validated) atomically under an idempotency key: the first call
   * writes them; every later call with the key returns what the first one created, writes nothing.
   * QUOTA_EXCEEDED when the workspace's record quota would be passed; VALUE_TOO_LARGE over the write's byte bound.
   */
  createRecords(
    workspaceId: string,
    tableId: string,
    values: RecordValues[],
    idempotencyKey: string,
  ): Promise<WriteResult>;
  /**
   * Create and update records atomically under an idempotency key (like createRecords): the
   * previous values of the updated records are kept with the write, for deleteWrite.
   */
  applyWrite(workspaceId: string, tableId: string, plan: WritePlan, idempotencyKey: string): Promise<WriteResult>;
  /** What a write under this key created in this workspace, if it happened (reconcile after a crash). */
  findWrite(workspaceId: string, idempotencyKey: string): Promise<WriteResult | undefined>;
  /**
   * Undo a write, once: delete the records the write under this key created in this workspace
   * and restore the records it updated to their values before it (the store's own record of the
   * write, never ids from elsewhere); those already gone are skipped. A write already undone is
   * left alone (0). The number of records deleted or restored.
   */
  deleteWrite(workspaceId: string, idempotencyKey: string): Promise<number>;
  /** Delete exactly these records of this table of this workspace (missing ones are already gone); the number deleted. */
  deleteRecords(workspaceId: string, tableId: string, recordIds: string[]): Promise<number>;
  /** The workspace's stored calendar ({} when none is set). */
  getCalendar(workspaceId: string): Promise<CalendarSetting>;
  /** Replace the workspace's stored calendar (validated by CalendarSettingSchema; {} clears it). */
  setCalendar(workspaceId: string, calendar: CalendarSetting): Promise<CalendarSetting>;
  /** Append to the notification outbox once per idempotency key (the provider reads the outbox). */
  sendMessage(
    workspaceId: string,
    channel: string,
    message: string,
    idempotencyKey: string,
  ): Promise<{ message: OutboxMessage; sent: boolean }>;
  findMessage(workspaceId: string, idempotencyKey: string): Promise<OutboxMessage | undefined>;
  listMessages(workspaceId: string): Promise<OutboxMessage[]>;
}

export const newTableId = () => `tbl_${randomBytes(8).toString("hex")}`;
export const newRecordId = () => `rec_${randomBytes(10).toString("hex")}`;
export const newMessageId = () => `msg_${randomBytes(10).toString("hex")}`;

export const DEFAULT_PAGE = 100;
export const MAX_PAGE = 1_000;
export const DEFAULT_TABLE_PAGE = 50;
export const MAX_TABLE_PAGE = 100;
/** Cursors are sequence numbers: Postgres bigint, so at most 2^63 - 1 (a larger one is refused before SQL). */
export const MAX_CURSOR = 2n ** 63n - 1n;

/** A page cursor as the decimal sequence number it is; anything else is INVALID_QUERY naming `cursor`. */
export function parseCursor(cursor: string | undefined): string {
  if (cursor === undefined) return "0";
  if (/^\d{1,19}$/.test(cursor) && BigInt(cursor) <= MAX_CURSOR) return cursor;
  throw new ToolchainError(
    ErrorCode.INVALID_QUERY,
    "query.cursor: not a cursor this server returned (the nextCursor of the previous page)",
    { details: { issues: [{ path: "query.cursor", message: "not a cursor this server returned" }] } },
  );
}
