/**
 * The table store's bounds: how much one workspace may keep and how large one table or one write
 * may be. Tables are read whole (GET /api/tables, schema.describe, every records write), so their
 * definitions are bounded in bytes, not only in counts; a workspace's totals are quotas so that one
 * workspace cannot grow the store (and every listing of it) without limit. Pure: both stores and
 * the records skill apply the same checks.
 */
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import type { RecordValues, TableDefinition } from "./fields.js";

export interface TableLimits {
  /** Tables one workspace may have (its demo table included). @default 100 */
  tablesPerWorkspace: number;
  /** Records one workspace may have, over all its tables. @default 100000 */
  recordsPerWorkspace: number;
  /** Fields one table may have (the schema also caps it at 100). @default 100 */
  fieldsPerTable: number;
  /** A table definition (name, fields, options) as JSON, in bytes. @default 32768 */
  tableDefinitionBytes: number;
  /** The values of one records write, as JSON, in bytes. @default 1048576 */
  writeBytes: number;
}

export const DEFAULT_TABLE_LIMITS: TableLimits = {
  tablesPerWorkspace: 100,
  recordsPerWorkspace: 100_000,
  fieldsPerTable: 100,
  tableDefinitionBytes: 32 * 1024,
  writeBytes: 1024 * 1024,
};

/** Each bound, its environment variable and the largest value accepted there. */
const ENV: Record<keyof TableLimits, { name: string; max: number }> = {
  tablesPerWorkspace: { name: "TOOLCHAIN_MAX_TABLES_PER_WORKSPACE", max: 1e6 },
  recordsPerWorkspace: { name: "TOOLCHAIN_MAX_RECORDS_PER_WORKSPACE", max: 1e10 },
  fieldsPerTable: { name: "TOOLCHAIN_MAX_TABLE_FIELDS", max: 100 },
  tableDefinitionBytes: { name: "TOOLCHAIN_MAX_TABLE_DEFINITION_BYTES", max: 2 ** 30 },
  writeBytes: { name: "TOOLCHAIN_MAX_RECORDS_WRITE_BYTES", max: 2 ** 30 },
};

/** The bounds from the environment (unset: the default); a bad value throws naming the variable. */
export function tableLimitsFromEnv(env: NodeJS.ProcessEnv = process.env): TableLimits {
  const out = { ...DEFAULT_TABLE_LIMITS };
  for (const k of Object.keys(ENV) as (keyof TableLimits)[]) {
    const { name, max } = ENV[k];
    const raw = env[name];
    if (raw === undefined || raw === "") continue;
    const v = Number(raw);
    if (!Number.isInteger(v) || v < 1 || v > max)
      throw new TypeError(`Expected ${name} to be an integer from 1 to ${max}, got "${raw}"`);
    out[k] = v;
  }
  return out;
}

export const resolveTableLimits = (l: Partial<TableLimits> = {}): TableLimits => ({ ...DEFAULT_TABLE_LIMITS, ...l });

const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v), "utf8");

/** A table definition within the field count and byte bounds, else VALUE_TOO_LARGE naming the field. */
export function checkDefinition(limits: TableLimits, def: TableDefinition): void {
  if (def.fields.length > limits.fieldsPerTable) {
    throw new ToolchainError(
      ErrorCode.VALUE_TOO_LARGE,
      `fields: a table has at most ${limits.fieldsPerTable} fields, got ${def.fields.length}`,
      { details: { field: "fields", limit: limits.fieldsPerTable } },
    );
  }
  const n = bytes(def);
  if (n > limits.tableDefinitionBytes) {
    throw new ToolchainError(
      ErrorCode.VALUE_TOO_LARGE,
      `fields: the table definition is ${n} bytes as JSON, over the limit of ${limits.tableDefinitionBytes}`,
      { details: { field: "fields", limit: limits.tableDefinitionBytes, bytes: n } },
    );
  }
}

/** One write's values within the byte bound (counted, not assumed from the record count). */
export function checkWrite(limits: TableLimits, values: readonly RecordValues[]): void {
  const n = bytes(values);
  if (n > limits.writeBytes) {
    throw new ToolchainError(
      ErrorCode.VALUE_TOO_LARGE,
      `records: ${values.length} records are ${n} bytes as JSON, over the limit of ${limits.writeBytes} for one write`,
      { effectStarted: false, details: { field: "records", limit: limits.writeBytes, bytes: n } },
    );
  }
}

export function tableQuotaError(limits: TableLimits): ToolchainError {
  return new ToolchainError(
    ErrorCode.QUOTA_EXCEEDED,
    `this workspace has ${limits.tablesPerWorkspace} tables, the most it may have`,
    { effectStarted: false, details: { quota: "tables", limit: limits.tablesPerWorkspace } },
  );
}

export function recordQuotaError(limits: TableLimits, have: number, adding: number): ToolchainError {
  return new ToolchainError(
    ErrorCode.QUOTA_EXCEEDED,
    `this workspace has ${have} records; ${adding} more would exceed its quota of ${limits.recordsPerWorkspace}`,
    {
      effectStarted: false,
      details: { quota: "records", limit: limits.recordsPerWorkspace, have, adding },
    },
  );
}
