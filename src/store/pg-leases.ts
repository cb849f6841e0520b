/**
 * Who executes a run, in Postgres: the drive's lease (acquire, heartbeat, release), claiming the
 * runs that need an executor (queued, backing off, left by a dead process, holding an unapplied
 * request), and a failed drive's count and backoff.
 */
import type pg from "pg";
import type { PendingConfirmation } from "../kernel/pending.js";
import type { StepError } from "../kernel/errors.js";
import { type Database } from "./db.js";
import {
  driveBackoffMs,
  driveFailedError,
  type DriveFailureOutcome,
  type DriveRetryPolicy,
  type RunRow,
} from "./run-store.js";
import { runRowFrom } from "./pg-run-rows.js";

export interface LeaseTables {
  runs: string;
  decisions: string;
}

/** What the leases tell the run store: a run's view changed, the event log's remembered tail, its transaction. */
export interface LeaseHooks {
  bump(runId: string): void;
  remember(runId: string, lastSeq: number, pending: PendingConfirmation[]): void;
  forget(runId: string): void;
  tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T>;
}

export class PgLeases {
  constructor(
    private readonly db: Database,
    private readonly t: LeaseTables,
    private readonly hooks: LeaseHooks,
  ) {}

  async acquireLease(runId: string, owner: string, ttlMs: number): Promise<boolean> {
    return (await this.takeLease(runId, owner, ttlMs)) !== undefined;
  }

  /** The lease, and the run row as it was taken (a drive reads it anyway: one round trip, not two). */
  async takeLease(runId: string, owner: string, ttlMs: number): Promise<RunRow | undefined> {
    const { rows } = await this.db.pool.query(
      `UPDATE ${this.t.runs} SET lease_owner = $2, lease_expires_at = now() + ($3 || ' milliseconds')::interval
       WHERE run_id = $1 AND (lease_owner IS NULL OR lease_owner = $2 OR lease_expires_at < now())
       RETURNING *`,
      [runId, owner, String(ttlMs)],
    );
    if (!rows.length) return undefined;
    this.hooks.bump(runId);
    // the first event batch of this drive can then go in one statement (appendFast checks it)
    this.hooks.remember(runId, Number(rows[0].last_seq), rows[0].pending_confirmations as PendingConfirmation[]);
    return runRowFrom(rows[0]);
  }

  /** One statement for every lease this owner holds (src/runtime/lease-keeper.ts): the runs still held. */
  async renewLeases(runIds: readonly string[], owner: string, ttlMs: number): Promise<Set<string>> {
    const { rows } = await this.db.pool.query(
      `UPDATE ${this.t.runs} SET lease_expires_at = now() + ($3 || ' milliseconds')::interval
       WHERE run_id = ANY($1::text[]) AND lease_owner = $2 RETURNING run_id`,
      [runIds, owner, String(ttlMs)],
    );
    return new Set(rows.map((r) => r.run_id as string));
  }

  async releaseLease(runId: string, owner: string): Promise<void> {
    this.hooks.forget(runId);
    await this.db.pool.query(
      `UPDATE ${this.t.runs} SET lease_owner = NULL, lease_expires_at = NULL WHERE run_id = $1 AND lease_owner = $2`,
      [runId, owner],
    );
    this.hooks.bump(runId);
  }

  async claimRunnable(owner: string, ttlMs: number, limit: number): Promise<string[]> {
    // Fairness: candidates are ranked within their workspace (oldest first), after the runs the
    // workspace already has executing (live leases), and taken rank by rank, so one workspace's
    // backlog (or its runs backing off after failures) cannot hold the others' runs back, also when
    // a worker claims one run per freed slot. Only the picked rows are locked (SKIP LOCKED: workers
    // never wait on each other).
    const { rows } = await this.db.pool.query(
      `WITH busy AS (
         SELECT workspace_id, count(*) AS n FROM ${this.t.runs}
         WHERE lease_owner IS NOT NULL AND lease_expires_at >= now() GROUP BY workspace_id),
       cand AS (
         SELECT r.run_id, r.created_at,
           row_number() OVER (PARTITION BY r.workspace_id ORDER BY r.created_at, r.run_id) + coalesce(b.n, 0) AS rn
         FROM ${this.t.runs} r LEFT JOIN busy b ON b.workspace_id = r.workspace_id
         WHERE (lease_owner IS NULL OR lease_expires_at < now())
           AND (next_attempt_at IS NULL OR next_attempt_at <= now())
           AND (status IN ('queued', 'planning', 'running')
             -- a lease left behind by a dead process: its drive ended mid-way, whatever the row says
             OR lease_owner IS NOT NULL
             OR (status IN ('waiting_confirmation', 'rollback_failed') AND pending_confirmations <> '[]'::jsonb
               AND (cancel_requested_at IS NOT NULL OR EXISTS (SELECT 1 FROM ${this.t.decisions} d WHERE d.run_id = r.run_id AND NOT d.applied))))),
       pick AS (SELECT run_id, rn, created_at FROM cand ORDER BY rn, created_at LIMIT $3 * 4),
       locked AS (
         SELECT r.run_id FROM ${this.t.runs} r JOIN pick p ON p.run_id = r.run_id
         WHERE (r.lease_owner IS NULL OR r.lease_expires_at < now())
         ORDER BY p.rn, p.created_at LIMIT $3 FOR UPDATE OF r SKIP LOCKED)
       UPDATE ${this.t.runs} u SET lease_owner = $1, lease_expires_at = now() + ($2 || ' milliseconds')::interval
       FROM locked WHERE u.run_id = locked.run_id
       RETURNING u.run_id`,
      [owner, String(ttlMs), limit],
    );
    for (const r of rows) this.hooks.bump(r.run_id);
    return rows.map((r) => r.run_id);
  }

  async recordDriveFailure(
    runId: string,
    owner: string,
    error: StepError,
    policy: DriveRetryPolicy,
    permanent: boolean,
  ): Promise<DriveFailureOutcome | undefined> {
    const out = await this.recordDriveFailureTx(runId, owner, error, policy, permanent);
    this.hooks.bump(runId);
    return out;
  }

  private recordDriveFailureTx(
    runId: string,
    owner: string,
    error: StepError,
    policy: DriveRetryPolicy,
    permanent: boolean,
  ): Promise<DriveFailureOutcome | undefined> {
    return this.hooks.tx(async (c) => {
      const { rows } = await c.query(
        `SELECT drive_failures, lease_owner, status FROM ${this.t.runs} WHERE run_id = $1 FOR UPDATE`,
        [runId],
      );
      const r = rows[0];
      if (!r || (r.lease_owner !== null && r.lease_owner !== owner)) return undefined;
      const failures = Number(r.drive_failures) + 1;
      const final = permanent || failures >= policy.maxFailures;
      const retryInMs = final ? 0 : driveBackoffMs(policy, failures);
      if (final) {
        await c.query(
          `UPDATE ${this.t.runs} SET drive_failures = $2, next_attempt_at = NULL, last_drive_error = $3::jsonb, status = 'failed', error = $4::jsonb,
             pending_confirmations = '[]'::jsonb, finished_at = now(), updated_at = now() WHERE run_id = $1`,
          [runId, failures, JSON.stringify(error), JSON.stringify(driveFailedError(error, failures, permanent))],
        );
      } else {
        await c.query(
          `UPDATE ${this.t.runs} SET drive_failures = $2, next_attempt_at = now() + ($3 || ' milliseconds')::interval, last_drive_error = $4::jsonb, updated_at = now() WHERE run_id = $1`,
          [runId, failures, String(retryInMs), JSON.stringify(error)],
        );
      }
      return { failures, final, retryInMs };
    });
  }
}
