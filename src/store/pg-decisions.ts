/**
 * Decisions, quorum votes, approval expiries and intent claims in Postgres: one row per (run, step,
 * round) decision and per (run, step, round, principal) vote, inserted idempotently (a repeat is
 * told apart from a conflicting second decision), and one intent per (run, step, attempt); the
 * executing process's read of the cancels and unapplied decisions of its runs (controlRequests).
 */
import type { Decision } from "../kernel/decision.js";
import { table, type Database } from "./db.js";
import {
  voterOf,
  sameDecision,
  type ControlRequests,
  type ExpiredWait,
  type ExpiryOutcome,
  type RecordDecisionResult,
} from "./run-store.js";

export interface DecisionTables {
  runs: string;
  decisions: string;
  approvals: string;
  expiries: string;
}

export class PgDecisions {
  constructor(
    private readonly db: Database,
    private readonly t: DecisionTables,
  ) {}

  async controlRequests(runIds: readonly string[]): Promise<Map<string, ControlRequests>> {
    const found = new Map<string, ControlRequests>();
    if (!runIds.length) return found;
    // the runs with a cancel or an unapplied decision only: almost always none
    const { rows } = await this.db.pool.query(
      `SELECT r.run_id, r.cancel_reason, r.cancel_requested_at, r.cancel_by,
         (SELECT coalesce(json_agg(json_build_object('stepId', d.step_id, 'round', d.round, 'decision', d.decision) ORDER BY d.created_at), '[]'::json)
          FROM ${this.t.decisions} d WHERE d.run_id = r.run_id AND NOT d.applied) AS decisions
       FROM ${this.t.runs} r WHERE r.run_id = ANY($1::text[])
         AND (r.cancel_requested_at IS NOT NULL OR EXISTS (SELECT 1 FROM ${this.t.decisions} d WHERE d.run_id = r.run_id AND NOT d.applied))`,
      [runIds],
    );
    for (const r of rows)
      found.set(r.run_id, {
        cancel: r.cancel_requested_at
          ? { reason: r.cancel_reason ?? "", at: new Date(r.cancel_requested_at).toISOString(), ...(r.cancel_by ?? {}) }
          : null,
        decisions: (r.decisions as { stepId: string; round: number; decision: Decision }[]).map((d) => ({
          ...d,
          round: Number(d.round),
        })),
      });
    return found;
  }

  async recordDecision(runId: string, stepId: string, round: number, d: Decision): Promise<RecordDecisionResult> {
    const ins = await this.db.pool.query(
      `INSERT INTO ${this.t.decisions} (run_id, step_id, round, decision) VALUES ($1, $2, $3, $4::jsonb) ON CONFLICT DO NOTHING`,
      [runId, stepId, round, JSON.stringify(d)],
    );
    if (ins.rowCount === 1) return "recorded";
    const { rows } = await this.db.pool.query(
      `SELECT decision FROM ${this.t.decisions} WHERE run_id = $1 AND step_id = $2 AND round = $3`,
      [runId, stepId, round],
    );
    const prev = rows[0]?.decision as Decision | undefined;
    return prev && sameDecision(prev, d) ? "duplicate" : "conflict";
  }

  async recordApproval(
    runId: string,
    stepId: string,
    round: number,
    d: Decision,
  ): Promise<{ result: RecordDecisionResult; votes: Decision[] }> {
    const ins = await this.db.pool.query(
      `INSERT INTO ${this.t.approvals} (run_id, step_id, round, principal, decision) VALUES ($1, $2, $3, $4, $5::jsonb) ON CONFLICT DO NOTHING`,
      [runId, stepId, round, voterOf(d), JSON.stringify(d)],
    );
    const { rows } = await this.db.pool.query(
      `SELECT principal, decision FROM ${this.t.approvals} WHERE run_id = $1 AND step_id = $2 AND round = $3 ORDER BY created_at, principal`,
      [runId, stepId, round],
    );
    const votes = rows.map((r) => r.decision as Decision);
    if (ins.rowCount === 1) return { result: "recorded", votes };
    const prev = rows.find((r) => r.principal === voterOf(d))?.decision as Decision | undefined;
    return { result: prev && sameDecision(prev, d) ? "duplicate" : "conflict", votes };
  }

  async expiredWaits(now: Date, limit: number): Promise<ExpiredWait[]> {
    const { rows } = await this.db.pool.query(
      `SELECT r.run_id, w.p->>'stepId' AS step_id, COALESCE((w.p->>'round')::int, 0) AS round,
              w.p->>'expiresAt' AS expires_at, w.p->>'onExpiry' AS on_expiry
         FROM ${this.t.runs} r CROSS JOIN LATERAL jsonb_array_elements(r.pending_confirmations) AS w(p)
        WHERE r.pending_confirmations <> '[]'::jsonb AND w.p->>'expiresAt' IS NOT NULL
          AND (w.p->>'expiresAt')::timestamptz <= $1
          AND NOT EXISTS (SELECT 1 FROM ${this.t.expiries} x WHERE x.run_id = r.run_id AND x.step_id = w.p->>'stepId'
                          AND x.round = COALESCE((w.p->>'round')::int, 0))
        ORDER BY (w.p->>'expiresAt')::timestamptz LIMIT $2`,
      [now.toISOString(), limit],
    );
    return rows.map((r) => ({
      runId: r.run_id as string,
      stepId: r.step_id as string,
      round: Number(r.round),
      expiresAt: new Date(r.expires_at as string).toISOString(),
      onExpiry: r.on_expiry === "leave" ? ("leave" as const) : ("reject" as const),
    }));
  }

  async markExpiryHandled(runId: string, stepId: string, round: number, outcome: ExpiryOutcome): Promise<boolean> {
    const r = await this.db.pool.query(
      `INSERT INTO ${this.t.expiries} (run_id, step_id, round, outcome) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
      [runId, stepId, round, outcome],
    );
    return r.rowCount === 1;
  }

  async listApprovals(runId: string) {
    const { rows } = await this.db.pool.query(
      `SELECT step_id, round, decision FROM ${this.t.approvals} WHERE run_id = $1 ORDER BY created_at, principal`,
      [runId],
    );
    return rows.map((r) => ({ stepId: r.step_id as string, round: Number(r.round), decision: r.decision as Decision }));
  }

  async getDecision(runId: string, stepId: string, round: number): Promise<Decision | undefined> {
    const { rows } = await this.db.pool.query(
      `SELECT decision FROM ${this.t.decisions} WHERE run_id = $1 AND step_id = $2 AND round = $3`,
      [runId, stepId, round],
    );
    return rows[0]?.decision;
  }

  async unappliedDecisions(runId: string) {
    const { rows } = await this.db.pool.query(
      `SELECT step_id, round, decision FROM ${this.t.decisions} WHERE run_id = $1 AND NOT applied ORDER BY created_at`,
      [runId],
    );
    return rows.map((r) => ({ stepId: r.step_id as string, round: Number(r.round), decision: r.decision as Decision }));
  }

  async markApplied(runId: string, keys: { stepId: string; round: number }[]): Promise<void> {
    if (!keys.length) return;
    await this.db.pool.query(
      `UPDATE ${this.t.decisions} d SET applied = true FROM jsonb_to_recordset($2::jsonb) AS x("stepId" text, round int) WHERE d.run_id = $1 AND d.step_id = x."stepId" AND d.round = x.round`,
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
    const { rowCount } = await this.db.pool.query(
      `SELECT 1 FROM ${table(this.db, "tool_chain_step_intents")} WHERE run_id = $1 AND step_id = $2 AND attempt = $3`,
      [runId, stepId, attempt],
    );
    return rowCount === 1;
  }
}
