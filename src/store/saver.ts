/**
 * LangGraph's PostgresSaver with its writes batched: the same rows, the same conflict rules, one
 * statement (one round trip) where the stock saver sends one statement per row inside
 * BEGIN/COMMIT.
 *
 * - `put` (a checkpoint): the stock saver sends BEGIN, one INSERT per changed channel blob, the
 *   checkpoint row, COMMIT: N + 3 sequential round trips per superstep, and a durable run's state
 *   has ~10 channels (measured: 31 blob inserts for one 200-step run against 6 for a bare
 *   one-node graph). Here: one statement, the blobs in a data-modifying CTE.
 * - `putWrites` (a task's or node's writes): BEGIN, one INSERT per write, COMMIT → one statement.
 *
 * A single statement is atomic in Postgres, so what the stock saver's transaction guarantees
 * (all the blobs and the checkpoint row, or none; all of a task's writes, or none) holds as before.
 * Reads (`getTuple`, `list`) are the stock saver's. `test/checkpointer-conformance.int.test.ts`
 * runs LangGraph's conformance suite against this class.
 *
 * `putWith` saves a checkpoint with another write riding in the same statement (a run's final
 * projection with its final checkpoint: src/runtime/final-ride.ts), `putWritesWith` a node's
 * writes with its events (src/runtime/events-ride.ts): both commit, or neither.
 */
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { Checkpoint, CheckpointMetadata, ChannelVersions, PendingWrite } from "@langchain/langgraph-checkpoint";
import type { StatementRider } from "./statement-rider.js";

type Row = unknown[];
interface Internals {
  SQL_STATEMENTS: Record<string, string>;
  pool: {
    connect(): Promise<{ query(sql: string, params?: unknown[]): Promise<unknown>; release(): void }>;
    query(sql: string, params?: unknown[]): Promise<unknown>;
  };
  _dumpCheckpoint(c: Checkpoint): unknown;
  _dumpBlobs(threadId: string, ns: string, values: Record<string, unknown>, versions: ChannelVersions): Promise<Row[]>;
  _dumpMetadata(m: CheckpointMetadata): Promise<unknown>;
  _dumpWrites(
    threadId: string,
    ns: string,
    checkpointId: string,
    taskId: string,
    writes: PendingWrite[],
  ): Promise<Row[]>;
}

/** The table an `INSERT INTO <table> (...)` statement of the stock saver writes (schema-qualified as configured). */
function tableOf(sql: string): string {
  const m = /INSERT INTO\s+(\S+)\s*\(/.exec(sql);
  if (!m) throw new Error("unexpected PostgresSaver SQL: no INSERT INTO");
  return m[1]!;
}

/** The stock saver's WRITES_IDX_MAP keys (special channels whose writes are upserted). */
const SPECIAL = new Set(["__error__", "__scheduled__", "__interrupt__", "__resume__"]);

export class BatchedPostgresSaver extends PostgresSaver {
  private sqlCache?: {
    put: string;
    putCtes: string;
    writesUpsert: (where: string) => string;
    writesInsert: (where: string) => string;
  };

  private get sql() {
    if (this.sqlCache) return this.sqlCache;
    const s = (this as unknown as Internals).SQL_STATEMENTS;
    const blobs = tableOf(s.UPSERT_CHECKPOINT_BLOBS_SQL!);
    const checkpoints = tableOf(s.UPSERT_CHECKPOINTS_SQL!);
    const writes = tableOf(s.UPSERT_CHECKPOINT_WRITES_SQL!);
    // `where`: a rider's guard (putWritesWith); the texts are made once per guard
    const writesInsert = (conflict: string) => {
      const texts = new Map<string, string>();
      return (where: string) => {
        let t = texts.get(where);
        if (t === undefined)
          texts.set(
            where,
            (t = `INSERT INTO ${writes} (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob)
       SELECT $1, $2, $3, $4, x.idx, x.channel, x.type, x.blob
       FROM unnest($5::int[], $6::text[], $7::text[], $8::bytea[]) AS x(idx, channel, type, blob) ${where}
       ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) ${conflict}`),
          );
        return t;
      };
    };
    const blobsCte = `b AS (
              INSERT INTO ${blobs} (thread_id, checkpoint_ns, channel, version, type, blob)
              SELECT $1, $2, x.channel, x.version, x.type, x.blob
              FROM unnest($3::text[], $4::text[], $5::text[], $6::bytea[]) AS x(channel, version, type, blob)
              ON CONFLICT (thread_id, checkpoint_ns, channel, version) DO NOTHING)`;
    const checkpointInsert = `INSERT INTO ${checkpoints} (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, checkpoint, metadata)
            VALUES ($1, $2, $7, $8, $9, $10)
            ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET checkpoint = EXCLUDED.checkpoint, metadata = EXCLUDED.metadata`;
    this.sqlCache = {
      put: `WITH ${blobsCte}
            ${checkpointInsert}`,
      putCtes: `WITH ${blobsCte},
            ck AS (${checkpointInsert})`,
      writesUpsert: writesInsert(
        "DO UPDATE SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob",
      ),
      writesInsert: writesInsert("DO NOTHING"),
    };
    return this.sqlCache;
  }

  override put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    return this.putWith(config, checkpoint, metadata, newVersions);
  }

  /** `put`, with `rider`'s write in the same statement. */
  async putWith(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
    rider?: StatementRider,
  ): Promise<RunnableConfig> {
    if (config.configurable === undefined) throw new Error(`Missing "configurable" field in "config" param`);
    const {
      thread_id,
      checkpoint_ns = "",
      checkpoint_id,
    } = config.configurable as { thread_id: string; checkpoint_ns?: string; checkpoint_id?: string };
    const self = this as unknown as Internals;
    const serializedCheckpoint = self._dumpCheckpoint(checkpoint);
    const [blobs, serializedMetadata] = await Promise.all([
      self._dumpBlobs(thread_id, checkpoint_ns, checkpoint.channel_values, newVersions),
      self._dumpMetadata(metadata),
    ]);
    // rows: [thread_id, checkpoint_ns, channel, version, type, blob | undefined]
    const params = [
      thread_id,
      checkpoint_ns,
      blobs.map((r) => r[2]),
      blobs.map((r) => r[3]),
      blobs.map((r) => r[4]),
      blobs.map((r) => r[5] ?? null),
      checkpoint.id,
      checkpoint_id,
      serializedCheckpoint,
      serializedMetadata,
    ];
    if (!rider) await self.pool.query(this.sql.put, params);
    else {
      const extra = rider.sql(params.length);
      const res = (await self.pool.query(`${this.sql.putCtes}, ${extra.ctes} ${extra.select}`, [
        ...params,
        ...rider.params,
      ])) as { rows: Record<string, unknown>[] };
      rider.committed(res.rows[0]!);
    }
    return { configurable: { thread_id, checkpoint_ns, checkpoint_id: checkpoint.id } };
  }

  override putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string): Promise<void> {
    return this.putWritesWith(config, writes, taskId);
  }

  /**
   * `putWrites`, with `rider`'s write in the same statement, the writes on its guard (none of
   * them is written when the rider's condition fails: the rider says so once committed).
   */
  async putWritesWith(
    config: RunnableConfig,
    writes: PendingWrite[],
    taskId: string,
    rider?: StatementRider,
  ): Promise<void> {
    if (!writes.length) return;
    const self = this as unknown as Internals;
    const c = config.configurable as { thread_id: string; checkpoint_ns: string; checkpoint_id: string } | undefined;
    // rows: [thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob]
    const dumped = await self._dumpWrites(
      c?.thread_id as string,
      c?.checkpoint_ns as string,
      c?.checkpoint_id as string,
      taskId,
      writes,
    );
    const upsert = writes.every((w) => SPECIAL.has(w[0]));
    // the stock saver upserts row by row (the last write of an idx wins); one statement may not
    // touch a row twice, so keep each idx's last write
    const rows = upsert ? [...new Map(dumped.map((r) => [r[4], r])).values()] : dumped;
    const params = [
      c?.thread_id,
      c?.checkpoint_ns,
      c?.checkpoint_id,
      taskId,
      rows.map((r) => r[4]),
      rows.map((r) => r[5]),
      rows.map((r) => r[6]),
      rows.map((r) => r[7]),
    ];
    const sql = upsert ? this.sql.writesUpsert : this.sql.writesInsert;
    if (!rider) {
      await self.pool.query(sql(""), params);
      return;
    }
    const extra = rider.sql(params.length);
    const guard = rider.guard ? `WHERE ${rider.guard}` : "";
    const res = (await self.pool.query(`WITH ${extra.ctes}, w AS (${sql(guard)} RETURNING 1) ${extra.select}`, [
      ...params,
      ...rider.params,
    ])) as { rows: Record<string, unknown>[] };
    rider.committed(res.rows[0]!);
  }
}

export type PutWritesWith = BatchedPostgresSaver["putWritesWith"];
