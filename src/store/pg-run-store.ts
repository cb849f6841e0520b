/**
 * RunStore on Postgres (server or embedded). Plain SQL; the event append (numbering, projection,
 * notification) is src/store/pg-event-log.ts.
 */
import type pg from "pg";
import type { PendingConfirmation } from "../kernel/pending.js";
import type { Decision } from "../kernel/decision.js";
import type { EmittedEvent, RunEvent } from "../kernel/events.js";
import type { RunStatus } from "../kernel/status.js";
import type { RunView } from "../runtime/view.js";
import { table, type Database } from "./db.js";
import { PgEventLog } from "./pg-event-log.js";
import { runRowFrom, viewFromRows } from "./pg-run-rows.js";
import { ViewGenerations } from "./view-generations.js";
import type { ToolChainPlan } from "../plan/schema.js";
import type { Acting } from "../kernel/actor.js";
import { LeaseLostError, voterOf, sameDecision, type NewRun, type RecordDecisionResult, type RunRow, type RunStore } from "./run-store.js";
import { driveBackoffMs, driveFailedError, type ControlRequests, type DriveFailureOutcome, type DriveRetryPolicy } from "./run-store.js";
import type { StepError } from "../kernel/errors.js";
import { decodeRunCursor, encodeRunCursor, type ListRunsQuery, type RunChange, type RunChangeListener, type RunPage } from "./run-store.js";

type Tx = pg.PoolClient;

/** Change watchers per database (pool): every PgRunStore on one database in this process tells the same watchers. */
const watchers = new WeakMap<pg.Pool, Set<RunChangeListener>>();
/** View versions of an embedded database's runs, shared by every store on its pool. */
const generations = new WeakMap<pg.Pool, ViewGenerations>();

export class PgRunStore implements RunStore {
  private readonly runs: string;
  /** LangGraph PostgresSaver's table in the same schema (read only, for viewVersion). */
  private readonly checkpoints: string;
  private readonly generations?: ViewGenerations;
  private readonly steps: string;
  private readonly events: string;
  private readonly decisions: string;
  private readonly approvals: string;
  private readonly log: PgEventLog;

  constructor(private readonly db: Database) {
    this.runs = table(db, "tool_chain_runs");
    this.steps = table(db, "tool_chain_step_runs");
    this.checkpoints = table(db, "checkpoints");
    if (!db.shared) {
      let g = generations.get(db.pool);
      if (!g) generations.set(db.pool, (g = new ViewGenerations()));
      this.generations = g;
      this.viewGeneration = (runId) => g.current(runId);
    }
    this.events = table(db, "tool_chain_event_logs");
    this.decisions = table(db, "tool_chain_decisions");
    this.approvals = table(db, "tool_chain_approvals");
    this.log = new PgEventLog(db, { runs: this.runs, steps: this.steps, events: this.events }, (fn) => this.tx(fn), (c, runId, plan, planning) => this.setPlan(c, runId, plan, planning));
  }

  private async tx<T>(fn: (c: Tx) => Promise<T>): Promise<T> {
    const c = await this.db.pool.connect();
    try {
      await c.query("BEGIN");
      const r = await fn(c);
      await c.query("COMMIT");
      return r;
    } catch (e) {
      await c.query("ROLLBACK").catch(() => undefined);
      throw e;
    } finally {
      c.release();
    }
  }

  async createRun(r: NewRun): Promise<void> {
    // one statement (atomic): the run row and its step rows
    const steps = r.plan.steps.map((st) => ({ step_id: st.stepId, skill_name: st.skillName, depends_on: st.dependsOn }));
    await this.db.pool.query(
      `WITH r AS (
         INSERT INTO ${this.runs} (run_id, workspace_id, trace_id, status, plan, context, memory, planning_input, admission) VALUES ($1, $2, $3, 'queued', $4, $5, $6, $7, $9)
         RETURNING run_id)
       INSERT INTO ${this.steps} (run_id, step_id, skill_name, status, depends_on)
       SELECT r.run_id, x.step_id, x.skill_name, 'pending', x.depends_on FROM r, jsonb_to_recordset($8::jsonb) AS x(step_id text, skill_name text, depends_on jsonb)
       ON CONFLICT DO NOTHING`,
      [r.runId, r.workspaceId, r.traceId, JSON.stringify(r.plan), JSON.stringify(r.context ?? {}), JSON.stringify(r.memory ?? {}), r.planningInput ? JSON.stringify(r.planningInput) : null, JSON.stringify(steps), r.admission ? JSON.stringify(r.admission) : null],
    );
  }

  private async insertSteps(c: Tx, runId: string, plan: ToolChainPlan): Promise<void> {
    if (!plan.steps.length) return;
    const rows = plan.steps.map((s) => ({ step_id: s.stepId, skill_name: s.skillName, depends_on: s.dependsOn }));
    await c.query(
      `INSERT INTO ${this.steps} (run_id, step_id, skill_name, status, depends_on)
       SELECT $1, x.step_id, x.skill_name, 'pending', x.depends_on FROM jsonb_to_recordset($2::jsonb) AS x(step_id text, skill_name text, depends_on jsonb)
       ON CONFLICT DO NOTHING`,
      [runId, JSON.stringify(rows)],
    );
  }

  /** A run started from a request: the planner node's plan replaces the empty one (once). */
  private async setPlan(c: Tx, runId: string, plan: ToolChainPlan, planning: unknown): Promise<void> {
    if (!plan.steps.length) return;
    const { rowCount } = await c.query(
      `UPDATE ${this.runs} SET plan = $2::jsonb, planning = COALESCE($3::jsonb, planning) WHERE run_id = $1 AND jsonb_array_length(plan->'steps') = 0`,
      [runId, JSON.stringify(plan), planning ? JSON.stringify(planning) : null],
    );
    if (rowCount) await this.insertSteps(c, runId, plan);
  }

  async getRow(runId: string): Promise<RunRow | undefined> {
    if (runId.includes("\u0000")) return undefined; // no run can have such an id (Postgres text cannot hold it)
    const { rows } = await this.db.pool.query(`SELECT * FROM ${this.runs} WHERE run_id = $1`, [runId]);
    const r = rows[0];
    return r ? runRowFrom(r) : undefined;
  }

  async append(runId: string, events: readonly EmittedEvent[], owner?: string): Promise<RunEvent[]> {
    const fresh = await this.log.append(runId, events, owner);
    if (fresh.length) this.changed({ runId, events: fresh });
    return fresh;
  }

  async list(runId: string, after = 0): Promise<RunEvent[]> {
    const { rows } = await this.db.pool.query(
      `SELECT seq, type, step_id, key, data, at FROM ${this.events} WHERE run_id = $1 AND seq > $2 ORDER BY seq`,
      [runId, after],
    );
    return rows.map((r) => {
      const e: RunEvent = { runId, seq: Number(r.seq), type: r.type, at: new Date(r.at).toISOString(), data: r.data, key: r.key };
      if (r.step_id !== null) e.stepId = r.step_id;
      return e;
    });
  }

  async sync(v: RunView, owner?: string): Promise<void> {
    await this.syncTx(v, owner);
    this.changed({ runId: v.runId, events: [] });
  }

  private async syncTx(v: RunView, owner?: string): Promise<void> {
    const rows = v.steps.map((s) => ({
      step_id: s.stepId,
      status: s.status,
      input: s.input,
      output: s.output,
      attempts: s.attempts,
      error_code: s.error?.code ?? null,
      error_message: s.error?.message ?? null,
      rollback_status: s.rollback?.status ?? null,
      rollback_error: s.rollback?.error ?? null,
      started_at: s.startedAt,
      finished_at: s.finishedAt,
    }));
    const params = [v.runId, v.status, JSON.stringify(v.memory), JSON.stringify(v.result), JSON.stringify(v.error), JSON.stringify(v.pendingConfirmations), owner ?? null, JSON.stringify(rows), JSON.stringify({ memoryKeys: Object.keys(v.memory) })];
    // the run row, then its step rows only if the run row was written (the lease still ours):
    // one statement, atomic as the transaction it replaces
    const sql = `WITH ru AS (
         UPDATE ${this.runs} SET status = $2, memory = $3::jsonb, result = $4::jsonb, error = $5::jsonb, pending_confirmations = $6::jsonb, updated_at = now(),
           drive_failures = 0, next_attempt_at = NULL,
           finished_at = CASE WHEN $2 IN ('completed','failed','cancelled','rolled_back','rollback_failed') THEN COALESCE(finished_at, now()) ELSE NULL END
         WHERE run_id = $1 AND ($7::text IS NULL OR lease_owner = $7 OR lease_owner IS NULL)
         RETURNING 1),
       st AS (
         UPDATE ${this.steps} s SET status = x.status, input = x.input, output = x.output, attempts = x.attempts, error_code = x.error_code,
           error_message = x.error_message, rollback_status = x.rollback_status, rollback_error = x.rollback_error,
           started_at = x.started_at, finished_at = x.finished_at, context_snapshot = $9::jsonb, updated_at = now()
         FROM jsonb_to_recordset($8::jsonb) AS x(step_id text, status text, input jsonb, output jsonb, attempts int, error_code text, error_message text,
           rollback_status text, rollback_error jsonb, started_at timestamptz, finished_at timestamptz)
         WHERE s.run_id = $1 AND s.step_id = x.step_id AND EXISTS (SELECT 1 FROM ru)
           AND (s.status IS DISTINCT FROM x.status OR s.output IS DISTINCT FROM x.output OR s.input IS DISTINCT FROM x.input OR s.rollback_status IS DISTINCT FROM x.rollback_status)
         RETURNING 1)
       SELECT (SELECT count(*) FROM ru) AS runs, (SELECT count(*) FROM st) AS steps`;
    const write = async (q: (sql: string, params: unknown[]) => Promise<{ rows: { runs: string }[] }>) => {
      const { rows: out } = await q(sql, params);
      if (Number(out[0]!.runs) !== 1) throw new LeaseLostError(v.runId, owner ?? "");
    };
    // the planner's plan, if an event carrying it was lost in a crash: with it, in one transaction
    if (v.planning) {
      await this.tx(async (c) => {
        await this.setPlan(c, v.runId, v.plan, v.planning);
        await write((sql, p) => c.query(sql, p));
      });
    } else {
      await write((sql, p) => this.db.pool.query(sql, p));
    }
  }

  async getView(runId: string): Promise<RunView | undefined> {
    const { rows } = await this.db.pool.query(`SELECT * FROM ${this.runs} WHERE run_id = $1`, [runId]);
    const r = rows[0];
    if (!r) return undefined;
    const steps = await this.db.pool.query(`SELECT * FROM ${this.steps} WHERE run_id = $1`, [runId]);
    // the latest applied decision of each step (who decided stays visible after checkpoints are pruned)
    const decided = await this.db.pool.query(`SELECT DISTINCT ON (step_id) step_id, decision FROM ${this.decisions} WHERE run_id = $1 AND applied ORDER BY step_id, round DESC`, [runId]);
    return viewFromRows(r, steps.rows, new Map(decided.rows.map((d) => [d.step_id as string, d.decision as Decision])));
  }

  async acquireLease(runId: string, owner: string, ttlMs: number): Promise<boolean> {
    const { rowCount, rows } = await this.db.pool.query(
      `UPDATE ${this.runs} SET lease_owner = $2, lease_expires_at = now() + ($3 || ' milliseconds')::interval
       WHERE run_id = $1 AND (lease_owner IS NULL OR lease_owner = $2 OR lease_expires_at < now())
       RETURNING last_seq, pending_confirmations`,
      [runId, owner, String(ttlMs)],
    );
    if (rowCount) {
      this.generations?.bump(runId);
      // the first event batch of this drive can then go in one statement (appendFast checks it)
      this.log.remember(runId, Number(rows[0].last_seq), rows[0].pending_confirmations as PendingConfirmation[]);
    }
    return rowCount === 1;
  }

  async renewLease(runId: string, owner: string, ttlMs: number): Promise<boolean> {
    const { rowCount } = await this.db.pool.query(
      `UPDATE ${this.runs} SET lease_expires_at = now() + ($3 || ' milliseconds')::interval WHERE run_id = $1 AND lease_owner = $2`,
      [runId, owner, String(ttlMs)],
    );
    return rowCount === 1;
  }

  async releaseLease(runId: string, owner: string): Promise<void> {
    this.log.forget(runId);
    await this.db.pool.query(`UPDATE ${this.runs} SET lease_owner = NULL, lease_expires_at = NULL WHERE run_id = $1 AND lease_owner = $2`, [runId, owner]);
    this.generations?.bump(runId);
  }

  async claimRunnable(owner: string, ttlMs: number, limit: number): Promise<string[]> {
    // Fairness: candidates are ranked within their workspace (oldest first) and taken rank by
    // rank, so one workspace's backlog (or its runs backing off after failures) cannot hold the
    // others' runs back. Only the picked rows are locked (SKIP LOCKED: workers never wait on each other).
    const { rows } = await this.db.pool.query(
      `WITH cand AS (
         SELECT run_id, created_at, row_number() OVER (PARTITION BY workspace_id ORDER BY created_at, run_id) AS rn
         FROM ${this.runs} r
         WHERE (lease_owner IS NULL OR lease_expires_at < now())
           AND (next_attempt_at IS NULL OR next_attempt_at <= now())
           AND (status IN ('queued', 'planning', 'running')
             -- a lease left behind by a dead process: its drive ended mid-way, whatever the row says
             OR lease_owner IS NOT NULL
             OR (status IN ('waiting_confirmation', 'rollback_failed') AND pending_confirmations <> '[]'::jsonb
               AND (cancel_requested_at IS NOT NULL OR EXISTS (SELECT 1 FROM ${this.decisions} d WHERE d.run_id = r.run_id AND NOT d.applied))))),
       pick AS (SELECT run_id, rn, created_at FROM cand ORDER BY rn, created_at LIMIT $3 * 4),
       locked AS (
         SELECT r.run_id FROM ${this.runs} r JOIN pick p ON p.run_id = r.run_id
         WHERE (r.lease_owner IS NULL OR r.lease_expires_at < now())
         ORDER BY p.rn, p.created_at LIMIT $3 FOR UPDATE OF r SKIP LOCKED)
       UPDATE ${this.runs} u SET lease_owner = $1, lease_expires_at = now() + ($2 || ' milliseconds')::interval
       FROM locked WHERE u.run_id = locked.run_id
       RETURNING u.run_id`,
      [owner, String(ttlMs), limit],
    );
    for (const r of rows) this.generations?.bump(r.run_id);
    return rows.map((r) => r.run_id);
  }

  async requestCancel(runId: string, reason: string, acting?: Acting): Promise<void> {
    // the first cancel's reason and principal win together
    await this.db.pool.query(
      `UPDATE ${this.runs} SET cancel_reason = COALESCE(cancel_reason, $2), cancel_by = CASE WHEN cancel_requested_at IS NULL THEN $3::jsonb ELSE cancel_by END,
         cancel_requested_at = COALESCE(cancel_requested_at, now()), updated_at = now()
       WHERE run_id = $1 AND NOT (status IN ('completed','failed','cancelled','rolled_back','rollback_failed') AND pending_confirmations = '[]'::jsonb)`,
      [runId, reason, acting ? JSON.stringify(acting) : null],
    );
    this.generations?.bump(runId);
  }

  async controlRequests(runId: string): Promise<ControlRequests> {
    const { rows } = await this.db.pool.query(
      `SELECT r.cancel_reason, r.cancel_requested_at, r.cancel_by,
         (SELECT coalesce(json_agg(json_build_object('stepId', d.step_id, 'round', d.round, 'decision', d.decision) ORDER BY d.created_at), '[]'::json)
          FROM ${this.decisions} d WHERE d.run_id = r.run_id AND NOT d.applied) AS decisions
       FROM ${this.runs} r WHERE r.run_id = $1`,
      [runId],
    );
    const r = rows[0];
    if (!r) return { cancel: null, decisions: [] };
    return {
      cancel: r.cancel_requested_at ? { reason: r.cancel_reason ?? "", at: new Date(r.cancel_requested_at).toISOString(), ...(r.cancel_by ?? {}) } : null,
      decisions: (r.decisions as { stepId: string; round: number; decision: Decision }[]).map((d) => ({ ...d, round: Number(d.round) })),
    };
  }

  async recordDriveFailure(runId: string, owner: string, error: StepError, policy: DriveRetryPolicy, permanent: boolean): Promise<DriveFailureOutcome | undefined> {
    const out = await this.recordDriveFailureTx(runId, owner, error, policy, permanent);
    this.generations?.bump(runId);
    return out;
  }

  private recordDriveFailureTx(runId: string, owner: string, error: StepError, policy: DriveRetryPolicy, permanent: boolean): Promise<DriveFailureOutcome | undefined> {
    return this.tx(async (c) => {
      const { rows } = await c.query(`SELECT drive_failures, lease_owner, status FROM ${this.runs} WHERE run_id = $1 FOR UPDATE`, [runId]);
      const r = rows[0];
      if (!r || (r.lease_owner !== null && r.lease_owner !== owner)) return undefined;
      const failures = Number(r.drive_failures) + 1;
      const final = permanent || failures >= policy.maxFailures;
      const retryInMs = final ? 0 : driveBackoffMs(policy, failures);
      if (final) {
        await c.query(
          `UPDATE ${this.runs} SET drive_failures = $2, next_attempt_at = NULL, last_drive_error = $3::jsonb, status = 'failed', error = $4::jsonb,
             pending_confirmations = '[]'::jsonb, finished_at = now(), updated_at = now() WHERE run_id = $1`,
          [runId, failures, JSON.stringify(error), JSON.stringify(driveFailedError(error, failures, permanent))],
        );
      } else {
        await c.query(
          `UPDATE ${this.runs} SET drive_failures = $2, next_attempt_at = now() + ($3 || ' milliseconds')::interval, last_drive_error = $4::jsonb, updated_at = now() WHERE run_id = $1`,
          [runId, failures, String(retryInMs), JSON.stringify(error)],
        );
      }
      return { failures, final, retryInMs };
    });
  }

  async recordDecision(runId: string, stepId: string, round: number, d: Decision): Promise<RecordDecisionResult> {
    const ins = await this.db.pool.query(
      `INSERT INTO ${this.decisions} (run_id, step_id, round, decision) VALUES ($1, $2, $3, $4::jsonb) ON CONFLICT DO NOTHING`,
      [runId, stepId, round, JSON.stringify(d)],
    );
    if (ins.rowCount === 1) return "recorded";
    const { rows } = await this.db.pool.query(`SELECT decision FROM ${this.decisions} WHERE run_id = $1 AND step_id = $2 AND round = $3`, [runId, stepId, round]);
    const prev = rows[0]?.decision as Decision | undefined;
    return prev && sameDecision(prev, d) ? "duplicate" : "conflict";
  }

  async recordApproval(runId: string, stepId: string, round: number, d: Decision): Promise<{ result: RecordDecisionResult; votes: Decision[] }> {
    const ins = await this.db.pool.query(
      `INSERT INTO ${this.approvals} (run_id, step_id, round, principal, decision) VALUES ($1, $2, $3, $4, $5::jsonb) ON CONFLICT DO NOTHING`,
      [runId, stepId, round, voterOf(d), JSON.stringify(d)],
    );
    const { rows } = await this.db.pool.query(`SELECT principal, decision FROM ${this.approvals} WHERE run_id = $1 AND step_id = $2 AND round = $3 ORDER BY created_at, principal`, [runId, stepId, round]);
    const votes = rows.map((r) => r.decision as Decision);
    if (ins.rowCount === 1) return { result: "recorded", votes };
    const prev = rows.find((r) => r.principal === voterOf(d))?.decision as Decision | undefined;
    return { result: prev && sameDecision(prev, d) ? "duplicate" : "conflict", votes };
  }

  async listApprovals(runId: string) {
    const { rows } = await this.db.pool.query(`SELECT step_id, round, decision FROM ${this.approvals} WHERE run_id = $1 ORDER BY created_at, principal`, [runId]);
    return rows.map((r) => ({ stepId: r.step_id as string, round: Number(r.round), decision: r.decision as Decision }));
  }

  async getDecision(runId: string, stepId: string, round: number): Promise<Decision | undefined> {
    const { rows } = await this.db.pool.query(`SELECT decision FROM ${this.decisions} WHERE run_id = $1 AND step_id = $2 AND round = $3`, [runId, stepId, round]);
    return rows[0]?.decision;
  }

  async unappliedDecisions(runId: string) {
    const { rows } = await this.db.pool.query(`SELECT step_id, round, decision FROM ${this.decisions} WHERE run_id = $1 AND NOT applied ORDER BY created_at`, [runId]);
    return rows.map((r) => ({ stepId: r.step_id as string, round: Number(r.round), decision: r.decision as Decision }));
  }

  async markApplied(runId: string, keys: { stepId: string; round: number }[]): Promise<void> {
    if (!keys.length) return;
    await this.db.pool.query(
      `UPDATE ${this.decisions} d SET applied = true FROM jsonb_to_recordset($2::jsonb) AS x("stepId" text, round int) WHERE d.run_id = $1 AND d.step_id = x."stepId" AND d.round = x.round`,
      [runId, JSON.stringify(keys)],
    );
  }

  async claimIntent(runId: string, stepId: string, attempt: number, owner?: string): Promise<boolean> {
    const { rowCount } = await this.db.pool.query(
      `INSERT INTO ${table(this.db, "tool_chain_step_intents")} (run_id, step_id, attempt, owner) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
      [runId, stepId, attempt, owner ?? null],
    );
    return rowCount === 1;
  }

  async hasIntent(runId: string, stepId: string, attempt: number): Promise<boolean> {
    const { rowCount } = await this.db.pool.query(`SELECT 1 FROM ${table(this.db, "tool_chain_step_intents")} WHERE run_id = $1 AND step_id = $2 AND attempt = $3`, [runId, stepId, attempt]);
    return rowCount === 1;
  }

  async prunable(before: Date, limit: number): Promise<string[]> {
    const { rows } = await this.db.pool.query(
      `SELECT run_id FROM ${this.runs} r WHERE finished_at < $1 AND checkpoint_pruned_at IS NULL
         AND status IN ('completed','failed','cancelled','rolled_back','rollback_failed')
         AND pending_confirmations = '[]'::jsonb AND lease_owner IS NULL
         AND NOT EXISTS (SELECT 1 FROM ${this.decisions} d WHERE d.run_id = r.run_id AND NOT d.applied)
       ORDER BY finished_at LIMIT $2`,
      [before, limit],
    );
    return rows.map((r) => r.run_id);
  }

  async markPruned(runIds: string[]): Promise<void> {
    if (runIds.length) await this.db.pool.query(`UPDATE ${this.runs} SET checkpoint_pruned_at = now() WHERE run_id = ANY($1::text[])`, [runIds]);
    for (const id of runIds) this.generations?.bump(id);
  }

  async listRuns(q: ListRunsQuery): Promise<RunPage> {
    const after = q.cursor ? decodeRunCursor(q.cursor) : undefined;
    const params: unknown[] = [q.workspaceId, q.limit + 1];
    let where = "workspace_id = $1";
    if (q.statuses?.length) {
      params.push(q.statuses);
      where += ` AND status = ANY($${params.length}::text[])`;
    }
    if (after) {
      params.push(after.t, after.runId);
      where += ` AND (created_at, run_id) < (timestamptz 'epoch' + $${params.length - 1}::bigint * interval '1 microsecond', $${params.length})`;
    }
    const { rows } = await this.db.pool.query(
      `SELECT run_id, status, trace_id, plan->>'planId' AS plan_id, plan->>'goal' AS goal, jsonb_array_length(plan->'steps') AS step_count,
         created_at, updated_at, finished_at, ((extract(epoch FROM created_at) * 1000000)::numeric(20,0))::text AS created_us
       FROM ${this.runs} WHERE ${where} ORDER BY created_at DESC, run_id DESC LIMIT $2`,
      params,
    );
    const page = rows.slice(0, q.limit);
    const last = page.at(-1);
    return {
      runs: page.map((r) => ({
        runId: r.run_id,
        status: r.status,
        traceId: r.trace_id,
        planId: r.plan_id,
        goal: r.goal,
        stepCount: Number(r.step_count),
        createdAt: new Date(r.created_at).toISOString(),
        updatedAt: new Date(r.updated_at).toISOString(),
        finishedAt: r.finished_at ? new Date(r.finished_at).toISOString() : null,
      })),
      nextCursor: rows.length > q.limit && last ? encodeRunCursor(last.created_us, last.run_id) : null,
    };
  }

  async countRuns(): Promise<Partial<Record<RunStatus, number>>> {
    const { rows } = await this.db.pool.query<{ status: RunStatus; n: string }>(`SELECT status, count(*) AS n FROM ${this.runs} GROUP BY status`);
    return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  }

  /**
   * One indexed read. updated_at moves with every append and sync (the changes that invalidate
   * the Redis view cache), the lease owner with every drive start and end, the latest root
   * checkpoint id with every superstep the graph saves (LangGraph's PostgresSaver in this schema,
   * as openRuntime sets it up). A missing checkpoints table gives undefined: no caching.
   */
  /**
   * Embedded Postgres belongs to this process: versions are kept in process (no query per GET).
   * Every store method that writes a run bumps it; the runtime bumps it after checkpoint writes.
   */
  viewGeneration?: (runId: string) => number;
  viewChanged(runId: string): void {
    this.generations?.bump(runId);
  }

  async viewVersion(runId: string): Promise<string | undefined> {
    if (runId.includes("\u0000")) return undefined;
    const { rows } = await this.db.pool.query(
      `SELECT r.updated_at::text AS u, r.last_seq AS q, r.status AS s, r.lease_owner AS o, r.cancel_requested_at::text AS c,
         (SELECT max(k.checkpoint_id) FROM ${this.checkpoints} k WHERE k.thread_id = r.run_id AND k.checkpoint_ns = '') AS k
       FROM ${this.runs} r WHERE r.run_id = $1`,
      [runId],
    ).catch((e: { code?: string }) => {
      if (e?.code === "42P01") return { rows: [] as Record<string, unknown>[] }; // no checkpoints table here
      throw e;
    });
    const r = rows[0];
    return r ? JSON.stringify([r.u, r.q, r.s, r.o, r.c, r.k]) : undefined;
  }

  onChange(listener: RunChangeListener): () => void {
    let set = watchers.get(this.db.pool);
    if (!set) watchers.set(this.db.pool, (set = new Set()));
    set.add(listener);
    return () => void set.delete(listener);
  }

  private changed(c: RunChange): void {
    this.generations?.bump(c.runId);
    for (const l of watchers.get(this.db.pool) ?? []) {
      try {
        l(c);
      } catch {
        // a watcher's failure is its own business
      }
    }
  }
}
