/** The run list (a workspace's runs, newest first, paged by a cursor) and counts by status, in Postgres. */
import type { RunStatus } from "../kernel/status.js";
import { type Database } from "./db.js";
import { decodeRunCursor, encodeRunCursor, type ListRunsQuery, type RunPage } from "./run-store.js";

export class PgRunList {
  constructor(
    private readonly db: Database,
    private readonly runs: string,
  ) {}

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
    const { rows } = await this.db.pool.query<{ status: RunStatus; n: string }>(
      `SELECT status, count(*) AS n FROM ${this.runs} GROUP BY status`,
    );
    return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  }
}
