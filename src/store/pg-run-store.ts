/**
 * RunStore on Postgres (server or embedded). Plain SQL; the event append (numbering, projection,
 * notification) is src/store/pg-event-log.ts, leases and claims pg-leases.ts, decisions, votes and
 * intents pg-decisions.ts, the run list pg-run-list.ts.
 */
import type pg from "pg";
import type { Decision } from "../kernel/decision.js";
import type { EmittedEvent, RunEvent } from "../kernel/events.js";
import type { RunView } from "../kernel/run-view.js";
import type { ToolChainPlan } from "../plan/schema.js";
import type { Acting } from "../kernel/actor.js";
import { table, type Database } from "./db.js";
import { PgEventLog } from "./pg-event-log.js";
import { PgDecisions } from "./pg-decisions.js";
import { PgLeases } from "./pg-leases.js";
import { PgRunList } from "./pg-run-list.js";
import { runRowFrom, viewFromRows } from "./pg-run-rows.js";
import { ViewGenerations } from "./view-generations.js";
import { shiftParams, type StatementRider } from "./statement-rider.js";
import {
  LeaseLostError,
  type NewRun,
  type RunChange,
  type RunChangeListener,
  type RunRow,
  type RunStore,
  type SyncOptions,
  type NewRunLease,
  type AppendRider,
} from "./run-store.js";

type Tx = pg.PoolClient;

/** Change watchers per database (pool): every PgRunStore on one database in this process tells the same watchers. */
const watchers = new WeakMap<pg.Pool, Set<RunChangeListener>>();
/** View versions of an embedded database's runs, shared by every store on its pool. */
const generations = new WeakMap<pg.Pool, ViewGenerations>();

/**
 * The pending confirmations a drive's final view writes ($6), each keeping the approval deadline
 * the row already holds for the same (step, round): the deadline is the one of the wait's first
 * event (src/store/projection.ts), which the graph state does not carry.
 */
const KEEP_DEADLINES = `(SELECT COALESCE(jsonb_agg(n.p || COALESCE((
    SELECT jsonb_build_object('expiresAt', q.v->'expiresAt', 'onExpiry', q.v->'onExpiry')
      FROM jsonb_array_elements(pending_confirmations) AS q(v)
     WHERE q.v->>'expiresAt' IS NOT NULL AND q.v->>'stepId' = n.p->>'stepId'
       AND COALESCE(q.v->>'round', '0') = COALESCE(n.p->>'round', '0') LIMIT 1), '{}'::jsonb) ORDER BY n.i), '[]'::jsonb)
  FROM jsonb_array_elements($6::jsonb) WITH ORDINALITY AS n(p, i))`;

export class PgRunStore implements RunStore {
  private readonly runs: string;
  /** LangGraph PostgresSaver's table in the same schema (read only, for viewVersion). */
  private readonly checkpoints: string;
  private readonly generations?: ViewGenerations;
  private readonly steps: string;
  private readonly events: string;
  private readonly decisions: string;
  private readonly approvals: string;
  private readonly expiries: string;
  private readonly log: PgEventLog;
  private readonly decisionRows: PgDecisions;
  private readonly runList: PgRunList;
  private readonly leases: PgLeases;

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
    this.expiries = table(db, "tool_chain_approval_expiries");
    this.decisionRows = new PgDecisions(db, {
      runs: this.runs,
      decisions: this.decisions,
      approvals: this.approvals,
      expiries: this.expiries,
    });
    this.runList = new PgRunList(db, this.runs);
    this.leases = new PgLeases(
      db,
      { runs: this.runs, decisions: this.decisions },
      {
        bump: (runId) => this.generations?.bump(runId),
        remember: (...a) => this.log.remember(...a),
        forget: (runId) => this.log.forget(runId),
        tx: (fn) => this.tx(fn),
      },
    );
    this.log = new PgEventLog(
      db,
      { runs: this.runs, steps: this.steps, events: this.events },
      (fn) => this.tx(fn),
      (c, runId, plan, planning) => this.setPlan(c, runId, plan, planning),
      (runId, events) => this.changed({ runId, events }),
    );
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

  async createRun(r: NewRun, lease?: NewRunLease): Promise<RunRow | undefined> {
    // one statement (atomic): the run row and its step rows. It ends in a SELECT of the run row so
    // its row count is 1 also for a request's run, which has no step rows yet (a commit point).
    // Leased (the creating process drives it at once): recorded with its lease, the row answered
    const steps = r.plan.steps.map((st) => ({
      step_id: st.stepId,
      skill_name: st.skillName,
      depends_on: st.dependsOn,
    }));
    const { rows } = await this.db.pool.query(
      `WITH r AS (
         INSERT INTO ${this.runs} (run_id, workspace_id, trace_id, status, plan, context, memory, planning_input, admission, trace_context, lease_owner, lease_expires_at)
         VALUES ($1, $2, $3, 'queued', $4, $5, $6, $7, $9, $10, $11::text, CASE WHEN $11::text IS NULL THEN NULL ELSE now() + ($12 || ' milliseconds')::interval END)
         RETURNING *)
       , s AS (
         INSERT INTO ${this.steps} (run_id, step_id, skill_name, status, depends_on)
         SELECT r.run_id, x.step_id, x.skill_name, 'pending', x.depends_on FROM r, jsonb_to_recordset($8::jsonb) AS x(step_id text, skill_name text, depends_on jsonb)
         ON CONFLICT DO NOTHING)
       SELECT * FROM r`,
      [
        r.runId,
        r.workspaceId,
        r.traceId,
        JSON.stringify(r.plan),
        JSON.stringify(r.context ?? {}),
        JSON.stringify(r.memory ?? {}),
        r.planningInput ? JSON.stringify(r.planningInput) : null,
        JSON.stringify(steps),
        r.admission ? JSON.stringify(r.admission) : null,
        r.traceContext ? JSON.stringify(r.traceContext) : null,
        lease?.owner ?? null,
        String(lease?.ttlMs ?? 0),
      ],
    );
    if (!lease) return undefined;
    this.generations?.bump(r.runId);
    // the first event batch of its drive can then go in one statement, as after takeLease
    this.log.remember(r.runId, 0, []);
    return runRowFrom(rows[0]);
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

  append(runId: string, events: readonly EmittedEvent[], owner?: string): Promise<RunEvent[]> {
    return this.log.append(runId, events, owner);
  }

  appendRider(runId: string, events: readonly EmittedEvent[], owner: string): AppendRider | undefined {
    return this.log.rider(runId, events, owner);
  }

  async list(runId: string, after = 0): Promise<RunEvent[]> {
    const { rows } = await this.db.pool.query(
      `SELECT seq, type, step_id, key, data, at FROM ${this.events} WHERE run_id = $1 AND seq > $2 ORDER BY seq`,
      [runId, after],
    );
    return rows.map((r) => {
      const e: RunEvent = {
        runId,
        seq: Number(r.seq),
        type: r.type,
        at: new Date(r.at).toISOString(),
        data: r.data,
        key: r.key,
      };
      if (r.step_id !== null) e.stepId = r.step_id;
      return e;
    });
  }

  async sync(v: RunView, owner?: string, opts?: SyncOptions): Promise<void> {
    const release = Boolean(opts?.releaseLease && owner);
    if (release) this.log.forget(v.runId);
    await this.syncTx(v, owner, release);
    this.changed({ runId: v.runId, events: [] });
  }

  /**
   * The final projection riding in the run's final checkpoint statement (src/runtime/final-ride.ts),
   * the lease released with it; undefined when it needs a transaction of its own (a planner's plan
   * written back with its steps).
   */
  syncRider(v: RunView, owner: string): StatementRider | undefined {
    if (v.planning) return undefined;
    const { ctes, params } = this.syncStatement(v, owner, true);
    return {
      params,
      sql: (base) => ({
        ctes: shiftParams(ctes, base),
        select: "SELECT (SELECT count(*) FROM ru) AS runs, (SELECT count(*) FROM st) AS steps",
      }),
      committed: (row) => {
        if (Number(row.runs) !== 1) throw new LeaseLostError(v.runId, owner);
        this.log.forget(v.runId);
        this.changed({ runId: v.runId, events: [] });
      },
    };
  }

  /** The run row, then its step rows only if the run row was written (the lease still ours): atomic in one statement. */
  private syncStatement(v: RunView, owner: string | undefined, release: boolean): { ctes: string; params: unknown[] } {
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
    const params = [
      v.runId,
      v.status,
      JSON.stringify(v.memory),
      JSON.stringify(v.result),
      JSON.stringify(v.error),
      JSON.stringify(v.pendingConfirmations),
      owner ?? null,
      JSON.stringify(rows),
      JSON.stringify({ memoryKeys: Object.keys(v.memory) }),
      release,
    ];
    const ctes = `ru AS (
         UPDATE ${this.runs} SET status = $2, memory = $3::jsonb, result = $4::jsonb, error = $5::jsonb, pending_confirmations = ${KEEP_DEADLINES}, updated_at = now(),
           drive_failures = 0, next_attempt_at = NULL,
           lease_owner = CASE WHEN $10::boolean THEN NULL ELSE lease_owner END,
           lease_expires_at = CASE WHEN $10::boolean THEN NULL ELSE lease_expires_at END,
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
         RETURNING 1)`;
    return { ctes, params };
  }

  private async syncTx(v: RunView, owner: string | undefined, release: boolean): Promise<void> {
    const { ctes, params } = this.syncStatement(v, owner, release);
    const sql = `WITH ${ctes}
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
    const decided = await this.db.pool.query(
      `SELECT DISTINCT ON (step_id) step_id, decision FROM ${this.decisions} WHERE run_id = $1 AND applied ORDER BY step_id, round DESC`,
      [runId],
    );
    return viewFromRows(r, steps.rows, new Map(decided.rows.map((d) => [d.step_id as string, d.decision as Decision])));
  }

  acquireLease(...a: Parameters<PgLeases["acquireLease"]>) {
    return this.leases.acquireLease(...a);
  }

  takeLease(...a: Parameters<PgLeases["takeLease"]>) {
    return this.leases.takeLease(...a);
  }

  renewLeases(...a: Parameters<PgLeases["renewLeases"]>) {
    return this.leases.renewLeases(...a);
  }

  releaseLease(...a: Parameters<PgLeases["releaseLease"]>) {
    return this.leases.releaseLease(...a);
  }

  claimRunnable(...a: Parameters<PgLeases["claimRunnable"]>) {
    return this.leases.claimRunnable(...a);
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

  controlRequests(runIds: readonly string[]) {
    return this.decisionRows.controlRequests(runIds);
  }

  recordDriveFailure(...a: Parameters<PgLeases["recordDriveFailure"]>) {
    return this.leases.recordDriveFailure(...a);
  }

  recordDecision(...a: Parameters<PgDecisions["recordDecision"]>) {
    return this.decisionRows.recordDecision(...a);
  }

  recordApproval(...a: Parameters<PgDecisions["recordApproval"]>) {
    return this.decisionRows.recordApproval(...a);
  }

  expiredWaits(...a: Parameters<PgDecisions["expiredWaits"]>) {
    return this.decisionRows.expiredWaits(...a);
  }

  markExpiryHandled(...a: Parameters<PgDecisions["markExpiryHandled"]>) {
    return this.decisionRows.markExpiryHandled(...a);
  }

  listApprovals(...a: Parameters<PgDecisions["listApprovals"]>) {
    return this.decisionRows.listApprovals(...a);
  }

  getDecision(...a: Parameters<PgDecisions["getDecision"]>) {
    return this.decisionRows.getDecision(...a);
  }

  unappliedDecisions(...a: Parameters<PgDecisions["unappliedDecisions"]>) {
    return this.decisionRows.unappliedDecisions(...a);
  }

  markApplied(...a: Parameters<PgDecisions["markApplied"]>) {
    return this.decisionRows.markApplied(...a);
  }

  claimIntent(...a: Parameters<PgDecisions["claimIntent"]>) {
    return this.decisionRows.claimIntent(...a);
  }

  hasIntent(...a: Parameters<PgDecisions["hasIntent"]>) {
    return this.decisionRows.hasIntent(...a);
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
    if (runIds.length)
      await this.db.pool.query(`UPDATE ${this.runs} SET checkpoint_pruned_at = now() WHERE run_id = ANY($1::text[])`, [
        runIds,
      ]);
    for (const id of runIds) this.generations?.bump(id);
  }

  listRuns(...a: Parameters<PgRunList["listRuns"]>) {
    return this.runList.listRuns(...a);
  }

  countRuns(...a: Parameters<PgRunList["countRuns"]>) {
    return this.runList.countRuns(...a);
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
    const { rows } = await this.db.pool
      .query(
        `SELECT r.updated_at::text AS u, r.last_seq AS q, r.status AS s, r.lease_owner AS o, r.cancel_requested_at::text AS c,
         (SELECT max(k.checkpoint_id) FROM ${this.checkpoints} k WHERE k.thread_id = r.run_id AND k.checkpoint_ns = '') AS k
       FROM ${this.runs} r WHERE r.run_id = $1`,
        [runId],
      )
      .catch((e: { code?: string }) => {
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
