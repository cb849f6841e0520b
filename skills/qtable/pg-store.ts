import { applyMigrations } from "../../src/store/migrations.js";
/**
 * The Postgres TableStore (server or embedded PGlite), in the runtime's schema, with its own
 * versioned migrations (`qtable_migrations`) applied under an advisory lock like the runtime's.
 */
import type pg from "pg";
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { table, type Database } from "../../src/store/db.js";
import type { CalendarSetting } from "./calendar.js";
import {
  TASKS_TABLE,
  type Field,
  type RecordValues,
  type Table,
  type TableDefinition,
  type TableRecord,
} from "./fields.js";
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

export function qtableMigrations(db: Pick<Database, "schema">): string[] {
  const t = (n: string) => table(db, n);
  return [
    // 0: tables, records, idempotent writes, the notification outbox, seeded workspaces
    `CREATE TABLE ${t("qtable_tables")} (
      table_id text PRIMARY KEY,
      workspace_id text NOT NULL,
      name text NOT NULL,
      fields jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (workspace_id, name)
    );
    CREATE TABLE ${t("qtable_records")} (
      seq bigserial PRIMARY KEY,
      record_id text NOT NULL UNIQUE,
      table_id text NOT NULL REFERENCES ${t("qtable_tables")} ON DELETE CASCADE,
      values jsonb NOT NULL,
      write_key text,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX qtable_records_table ON ${t("qtable_records")} (table_id, seq);
    CREATE TABLE ${t("qtable_writes")} (
      idempotency_key text PRIMARY KEY,
      workspace_id text NOT NULL,
      table_id text NOT NULL,
      record_ids jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE ${t("qtable_outbox")} (
      seq bigserial PRIMARY KEY,
      message_id text NOT NULL UNIQUE,
      workspace_id text NOT NULL,
      channel text NOT NULL,
      message text NOT NULL,
      idempotency_key text NOT NULL UNIQUE,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE ${t("qtable_workspaces")} (
      workspace_id text PRIMARY KEY,
      demo_table_id text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    );`,
    // 1: every row carries its workspace (records too: a delete or count is scoped without a join),
    // idempotency keys are unique per workspace, tables page by a sequence (keyset pagination)
    `ALTER TABLE ${t("qtable_tables")} ADD COLUMN seq bigserial;
    CREATE UNIQUE INDEX qtable_tables_workspace_seq ON ${t("qtable_tables")} (workspace_id, seq);
    ALTER TABLE ${t("qtable_records")} ADD COLUMN workspace_id text;
    UPDATE ${t("qtable_records")} r SET workspace_id = x.workspace_id FROM ${t("qtable_tables")} x WHERE x.table_id = r.table_id;
    ALTER TABLE ${t("qtable_records")} ALTER COLUMN workspace_id SET NOT NULL;
    CREATE INDEX qtable_records_workspace_write ON ${t("qtable_records")} (workspace_id, write_key);
    ALTER TABLE ${t("qtable_writes")} DROP CONSTRAINT qtable_writes_pkey, ADD PRIMARY KEY (workspace_id, idempotency_key);
    ALTER TABLE ${t("qtable_outbox")} DROP CONSTRAINT qtable_outbox_idempotency_key_key, ADD CONSTRAINT qtable_outbox_workspace_key UNIQUE (workspace_id, idempotency_key);`,
    // 2: a write may update existing records (re-planning by task key): their previous values are
    // kept with the write, and an undo happens once; demo tables get the task key column
    `ALTER TABLE ${t("qtable_writes")} ADD COLUMN updated jsonb NOT NULL DEFAULT '[]'::jsonb, ADD COLUMN undone_at timestamptz;
    UPDATE ${t("qtable_tables")} SET fields = fields || '[{"name":"key","type":"text"}]'::jsonb
      WHERE table_id IN (SELECT demo_table_id FROM ${t("qtable_workspaces")}) AND NOT fields @> '[{"name":"key"}]'::jsonb;`,
    // 3: demo tables get the phase hierarchy (parent), the goal a plan's rows carry, and the
    // status a re-plan gives the rows it no longer has
    `UPDATE ${t("qtable_tables")} x SET fields = (
        SELECT jsonb_agg(CASE WHEN f->>'name' = 'status' AND f->>'type' = 'select' AND NOT (f->'options') ? 'removed'
          THEN jsonb_set(f, '{options}', (f->'options') || '"removed"'::jsonb) ELSE f END ORDER BY n)
        FROM jsonb_array_elements(x.fields) WITH ORDINALITY AS e(f, n))
      WHERE table_id IN (SELECT demo_table_id FROM ${t("qtable_workspaces")});
    UPDATE ${t("qtable_tables")} SET fields = fields || '[{"name":"parent","type":"relation"}]'::jsonb
      WHERE table_id IN (SELECT demo_table_id FROM ${t("qtable_workspaces")}) AND NOT fields @> '[{"name":"parent"}]'::jsonb;
    UPDATE ${t("qtable_tables")} SET fields = fields || '[{"name":"goal","type":"text"}]'::jsonb
      WHERE table_id IN (SELECT demo_table_id FROM ${t("qtable_workspaces")}) AND NOT fields @> '[{"name":"goal"}]'::jsonb;`,
    // 4: a workspace's stored calendar (overrides the configuration's)
    `ALTER TABLE ${t("qtable_workspaces")} ADD COLUMN calendar jsonb NOT NULL DEFAULT '{}'::jsonb;`,
  ];
}

const LOCK_KEY = 7_310_031; // arbitrary, constant: "qtable migrations"
/** Serialises one workspace's quota checks with its inserts (arbitrary, constant). */
const QUOTA_LOCK_KEY = 7_310_032;

export async function migrateQTable(db: Database): Promise<void> {
  await applyMigrations(db, { lockKey: LOCK_KEY, versionTable: "qtable_migrations", list: qtableMigrations(db) });
}

interface TableRow {
  table_id: string;
  name: string;
  fields: Field[];
}
const toTable = (r: TableRow): Table => ({ id: r.table_id, name: r.name, fields: r.fields });

export class PgTableStore implements TableStore {
  readonly limits: TableLimits;
  private readonly t: (n: string) => string;
  /** Workspaces known to be seeded (saves a round trip per call). */
  private readonly seeded = new Map<string, Table>();

  constructor(
    private readonly db: Database,
    opts: { limits?: Partial<TableLimits> } = {},
  ) {
    this.t = (n) => table(db, n);
    this.limits = resolveTableLimits(opts.limits);
  }

  async ensureWorkspace(workspaceId: string): Promise<Table> {
    const hit = this.seeded.get(workspaceId);
    if (hit) return structuredClone(hit);
    const t = await this.tx(async (c) => {
      // one row per workspace decides who seeds it: concurrent callers wait on the row lock
      const claimed = await c.query(
        `INSERT INTO ${this.t("qtable_workspaces")} (workspace_id, demo_table_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING demo_table_id`,
        [workspaceId, newTableId()],
      );
      if (claimed.rows.length) {
        const id = claimed.rows[0].demo_table_id as string;
        // a user table may already be called "Tasks": the demo table then takes a free name
        let name = TASKS_TABLE.name;
        for (
          let n = 2;
          (
            await c.query(`SELECT 1 FROM ${this.t("qtable_tables")} WHERE workspace_id = $1 AND name = $2`, [
              workspaceId,
              name,
            ])
          ).rows.length;
          n++
        )
          name = `${TASKS_TABLE.name} ${n}`;
        await c.query(
          `INSERT INTO ${this.t("qtable_tables")} (table_id, workspace_id, name, fields) VALUES ($1, $2, $3, $4)`,
          [id, workspaceId, name, JSON.stringify(TASKS_TABLE.fields)],
        );
      }
      const { rows } = await c.query<TableRow>(
        `SELECT t.table_id, t.name, t.fields FROM ${this.t("qtable_workspaces")} w JOIN ${this.t("qtable_tables")} t ON t.table_id = w.demo_table_id WHERE w.workspace_id = $1`,
        [workspaceId],
      );
      return toTable(rows[0]!);
    });
    this.seeded.set(workspaceId, t);
    return structuredClone(t);
  }

  async listTables(workspaceId: string, page: PageQuery = {}): Promise<TablePage> {
    const after = parseCursor(page.cursor);
    const limit = page.limit ?? DEFAULT_TABLE_PAGE;
    const { rows } = await this.db.pool.query<TableRow & { seq: string }>(
      `SELECT seq, table_id, name, fields FROM ${this.t("qtable_tables")} WHERE workspace_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      [workspaceId, after, limit + 1],
    );
    const shown = rows.slice(0, limit);
    return { tables: shown.map(toTable), nextCursor: rows.length > limit ? String(shown.at(-1)!.seq) : null };
  }

  async createTable(workspaceId: string, def: TableDefinition): Promise<Table> {
    checkDefinition(this.limits, def);
    try {
      return await this.tx(async (c) => {
        await this.lockQuota(c, workspaceId);
        const taken = await c.query(`SELECT 1 FROM ${this.t("qtable_tables")} WHERE workspace_id = $1 AND name = $2`, [
          workspaceId,
          def.name,
        ]);
        if (taken.rows.length) throw nameTaken(def.name);
        const { rows: n } = await c.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM ${this.t("qtable_tables")} WHERE workspace_id = $1`,
          [workspaceId],
        );
        if (n[0]!.n >= this.limits.tablesPerWorkspace) throw tableQuotaError(this.limits);
        const { rows } = await c.query<TableRow>(
          `INSERT INTO ${this.t("qtable_tables")} (table_id, workspace_id, name, fields) VALUES ($1, $2, $3, $4) RETURNING table_id, name, fields`,
          [newTableId(), workspaceId, def.name, JSON.stringify(def.fields)],
        );
        return toTable(rows[0]!);
      });
    } catch (e) {
      // the demo table seeded concurrently under the same name
      if ((e as { code?: string }).code === "23505") throw nameTaken(def.name);
      throw e;
    }
  }

  async getTable(workspaceId: string, idOrName: string): Promise<Table | undefined> {
    const { rows } = await this.db.pool.query<TableRow>(
      `SELECT table_id, name, fields FROM ${this.t("qtable_tables")} WHERE workspace_id = $1 AND (table_id = $2 OR name = $2) ORDER BY (table_id = $2) DESC LIMIT 1`,
      [workspaceId, idOrName],
    );
    return rows[0] ? toTable(rows[0]) : undefined;
  }

  async listRecords(workspaceId: string, tableId: string, page: PageQuery = {}): Promise<RecordPage | undefined> {
    const after = parseCursor(page.cursor);
    const t = await this.getTable(workspaceId, tableId);
    if (!t) return undefined;
    const limit = page.limit ?? DEFAULT_PAGE;
    const { rows } = await this.db.pool.query<{ seq: string; record_id: string; values: RecordValues }>(
      `SELECT seq, record_id, values FROM ${this.t("qtable_records")} WHERE workspace_id = $1 AND table_id = $2 AND seq > $3 ORDER BY seq LIMIT $4`,
      [workspaceId, t.id, after, limit + 1],
    );
    const more = rows.length > limit;
    const shown = rows.slice(0, limit);
    return {
      records: shown.map((r) => ({ id: r.record_id, values: r.values })),
      nextCursor: more ? String(shown.at(-1)!.seq) : null,
    };
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
    return this.tx(async (c) => {
      const t = (
        await c.query<{ table_id: string }>(
          `SELECT table_id FROM ${this.t("qtable_tables")} WHERE workspace_id = $1 AND (table_id = $2 OR name = $2) ORDER BY (table_id = $2) DESC LIMIT 1`,
          [workspaceId, tableId],
        )
      ).rows[0];
      if (!t)
        throw new ToolchainError(ErrorCode.TABLE_NOT_FOUND, `table ${tableId} not found`, { effectStarted: false });
      const ids = plan.creates.map((r) => r.id);
      // the key row is the write's identity: a second writer with the key waits on it, then finds it
      const claimed = await c.query(
        `INSERT INTO ${this.t("qtable_writes")} (idempotency_key, workspace_id, table_id, record_ids) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING 1`,
        [idempotencyKey, workspaceId, t.table_id, JSON.stringify(ids)],
      );
      if (!claimed.rows.length) return (await this.readWrite(c, workspaceId, idempotencyKey))!;
      checkWrite(
        this.limits,
        [...plan.creates, ...plan.updates].map((r) => r.values),
      );
      await this.lockQuota(c, workspaceId);
      const { rows: n } = await c.query<{ n: string }>(
        `SELECT count(*) AS n FROM ${this.t("qtable_records")} WHERE workspace_id = $1`,
        [workspaceId],
      );
      const have = Number(n[0]!.n);
      if (have + ids.length > this.limits.recordsPerWorkspace) throw recordQuotaError(this.limits, have, ids.length);
      if (ids.length) {
        await c.query(
          `INSERT INTO ${this.t("qtable_records")} (record_id, workspace_id, table_id, values, write_key) SELECT r.id, $1, $2, r.v, $3 FROM unnest($4::text[], $5::jsonb[]) WITH ORDINALITY AS r(id, v, n) ORDER BY r.n`,
          [workspaceId, t.table_id, idempotencyKey, ids, plan.creates.map((r) => JSON.stringify(r.values))],
        );
      }
      const updated: TableRecord[] = [];
      if (plan.updates.length) {
        // the previous values, read under the row locks of this transaction: what the undo restores
        const { rows: before } = await c.query<{ record_id: string; values: RecordValues }>(
          `SELECT record_id, values FROM ${this.t("qtable_records")} WHERE workspace_id = $1 AND table_id = $2 AND record_id = ANY($3::text[]) ORDER BY seq FOR UPDATE`,
          [workspaceId, t.table_id, plan.updates.map((u) => u.id)],
        );
        const found = new Set(before.map((r) => r.record_id));
        const apply = plan.updates.filter((u) => found.has(u.id));
        await c.query(
          `UPDATE ${this.t("qtable_records")} r SET values = u.v FROM unnest($3::text[], $4::jsonb[]) AS u(id, v) WHERE r.workspace_id = $1 AND r.table_id = $2 AND r.record_id = u.id`,
          [workspaceId, t.table_id, apply.map((u) => u.id), apply.map((u) => JSON.stringify(u.values))],
        );
        await c.query(
          `UPDATE ${this.t("qtable_writes")} SET updated = $3 WHERE workspace_id = $1 AND idempotency_key = $2`,
          [workspaceId, idempotencyKey, JSON.stringify(before.map((r) => ({ id: r.record_id, values: r.values })))],
        );
        updated.push(...apply.map((u) => ({ id: u.id, values: u.values })));
      }
      const records: TableRecord[] = plan.creates.map((r) => ({ id: r.id, values: r.values }));
      return { tableId: t.table_id, records, updated, created: true };
    });
  }

  async findWrite(workspaceId: string, idempotencyKey: string): Promise<WriteResult | undefined> {
    const c = await this.db.pool.connect();
    try {
      return await this.readWrite(c, workspaceId, idempotencyKey);
    } finally {
      c.release();
    }
  }

  private async readWrite(c: pg.PoolClient, workspaceId: string, key: string): Promise<WriteResult | undefined> {
    const w = (
      await c.query<{ table_id: string; record_ids: string[]; updated: TableRecord[] }>(
        `SELECT table_id, record_ids, updated FROM ${this.t("qtable_writes")} WHERE workspace_id = $1 AND idempotency_key = $2`,
        [workspaceId, key],
      )
    ).rows[0];
    if (!w) return undefined;
    const all = [...w.record_ids, ...w.updated.map((u) => u.id)];
    const { rows } = await c.query<{ record_id: string; values: RecordValues }>(
      `SELECT record_id, values FROM ${this.t("qtable_records")} WHERE workspace_id = $1 AND record_id = ANY($2::text[])`,
      [workspaceId, all],
    );
    const byId = new Map(rows.map((r) => [r.record_id, r.values]));
    // records deleted since (compensated) are reported by id with the values they no longer have
    const now = (id: string) => ({ id, values: byId.get(id) ?? {} });
    return {
      tableId: w.table_id,
      records: w.record_ids.map(now),
      updated: w.updated.map((u) => now(u.id)),
      created: false,
    };
  }

  async deleteWrite(workspaceId: string, idempotencyKey: string): Promise<number> {
    return this.tx(async (c) => {
      // the write's row lock makes concurrent undos wait, then see undone_at: the undo happens once
      const w = (
        await c.query<{ updated: TableRecord[]; undone_at: Date | null }>(
          `SELECT updated, undone_at FROM ${this.t("qtable_writes")} WHERE workspace_id = $1 AND idempotency_key = $2 FOR UPDATE`,
          [workspaceId, idempotencyKey],
        )
      ).rows[0];
      if (!w || w.undone_at) return 0;
      // the records carry the key of the write that created them: nothing else is matched
      const del = await c.query(`DELETE FROM ${this.t("qtable_records")} WHERE workspace_id = $1 AND write_key = $2`, [
        workspaceId,
        idempotencyKey,
      ]);
      let restored = 0;
      if (w.updated.length) {
        const r = await c.query(
          `UPDATE ${this.t("qtable_records")} r SET values = u.v FROM unnest($2::text[], $3::jsonb[]) AS u(id, v) WHERE r.workspace_id = $1 AND r.record_id = u.id`,
          [workspaceId, w.updated.map((u) => u.id), w.updated.map((u) => JSON.stringify(u.values))],
        );
        restored = r.rowCount ?? 0;
      }
      await c.query(
        `UPDATE ${this.t("qtable_writes")} SET undone_at = now() WHERE workspace_id = $1 AND idempotency_key = $2`,
        [workspaceId, idempotencyKey],
      );
      return (del.rowCount ?? 0) + restored;
    });
  }

  async deleteRecords(workspaceId: string, tableId: string, recordIds: string[]): Promise<number> {
    if (!recordIds.length) return 0;
    const r = await this.db.pool.query(
      `DELETE FROM ${this.t("qtable_records")} WHERE workspace_id = $1 AND table_id = $2 AND record_id = ANY($3::text[])`,
      [workspaceId, tableId, recordIds],
    );
    return r.rowCount ?? 0;
  }

  async getCalendar(workspaceId: string): Promise<CalendarSetting> {
    const { rows } = await this.db.pool.query<{ calendar: CalendarSetting }>(
      `SELECT calendar FROM ${this.t("qtable_workspaces")} WHERE workspace_id = $1`,
      [workspaceId],
    );
    return rows[0]?.calendar ?? {};
  }

  async setCalendar(workspaceId: string, calendar: CalendarSetting): Promise<CalendarSetting> {
    await this.ensureWorkspace(workspaceId); // the workspace's row holds it
    await this.db.pool.query(`UPDATE ${this.t("qtable_workspaces")} SET calendar = $2 WHERE workspace_id = $1`, [
      workspaceId,
      JSON.stringify(calendar),
    ]);
    return calendar;
  }

  async sendMessage(
    workspaceId: string,
    channel: string,
    message: string,
    idempotencyKey: string,
  ): Promise<{ message: OutboxMessage; sent: boolean }> {
    const { rows } = await this.db.pool.query(
      `INSERT INTO ${this.t("qtable_outbox")} (message_id, workspace_id, channel, message, idempotency_key) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (workspace_id, idempotency_key) DO NOTHING RETURNING message_id, channel, message, idempotency_key, created_at`,
      [newMessageId(), workspaceId, channel, message, idempotencyKey],
    );
    if (rows[0]) return { message: toMessage(rows[0]), sent: true };
    return { message: (await this.findMessage(workspaceId, idempotencyKey))!, sent: false };
  }

  async findMessage(workspaceId: string, idempotencyKey: string): Promise<OutboxMessage | undefined> {
    const { rows } = await this.db.pool.query(
      `SELECT message_id, channel, message, idempotency_key, created_at FROM ${this.t("qtable_outbox")} WHERE workspace_id = $1 AND idempotency_key = $2`,
      [workspaceId, idempotencyKey],
    );
    return rows[0] ? toMessage(rows[0]) : undefined;
  }

  async listMessages(workspaceId: string): Promise<OutboxMessage[]> {
    const { rows } = await this.db.pool.query(
      `SELECT message_id, channel, message, idempotency_key, created_at FROM ${this.t("qtable_outbox")} WHERE workspace_id = $1 ORDER BY seq`,
      [workspaceId],
    );
    return rows.map(toMessage);
  }

  /** Quota checks of one workspace happen one at a time (count, then insert, in one transaction). */
  private async lockQuota(c: pg.PoolClient, workspaceId: string): Promise<void> {
    await c.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [QUOTA_LOCK_KEY, workspaceId]);
  }

  private async tx<T>(f: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    const c = await this.db.pool.connect();
    try {
      await c.query("BEGIN");
      const out = await f(c);
      await c.query("COMMIT");
      return out;
    } catch (e) {
      await c.query("ROLLBACK").catch(() => undefined);
      throw e;
    } finally {
      c.release();
    }
  }
}

const nameTaken = (name: string) =>
  new ToolchainError(ErrorCode.TABLE_NAME_TAKEN, `a table named "${name}" already exists in this workspace`);

function toMessage(r: {
  message_id: string;
  channel: string;
  message: string;
  idempotency_key: string;
  created_at: Date | string;
}): OutboxMessage {
  return {
    id: r.message_id,
    channel: r.channel,
    message: r.message,
    idempotencyKey: r.idempotency_key,
    createdAt: new Date(r.created_at).toISOString(),
  };
}
