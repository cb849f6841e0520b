/**
 * Postgres rows → the store's shapes (RunRow, RunView): pure mapping, no queries.
 */
import { asCarrier } from "../telemetry/trace-context.js";
import type { RunStatus, StepStatus } from "../kernel/status.js";
import { exportPlanGraph } from "../plan/graph-export.js";
import { decisionView, type RunView } from "../kernel/run-view.js";
import type { Decision } from "../kernel/decision.js";
import type { RunRow } from "./run-store.js";

/** A row as pg returns it (columns typed by the pool's parsers, src/store/pg-types.ts). */
type Row = Record<string, any>;

/** A tool_chain_runs row. */
export function runRowFrom(r: Row): RunRow {
  return {
    runId: r.run_id,
    workspaceId: r.workspace_id,
    traceId: r.trace_id,
    traceContext: asCarrier(r.trace_context) ?? null,
    status: r.status,
    plan: r.plan,
    context: r.context,
    memory: r.memory,
    pendingConfirmations: r.pending_confirmations,
    leaseOwner: r.lease_owner,
    leaseExpiresAt: r.lease_expires_at,
    lastSeq: Number(r.last_seq),
    checkpointPruned: r.checkpoint_pruned_at !== null,
    planningInput: r.planning_input ?? null,
    error: r.error ?? null,
    cancelRequest: r.cancel_requested_at
      ? { reason: r.cancel_reason ?? "", at: new Date(r.cancel_requested_at).toISOString(), ...(r.cancel_by ?? {}) }
      : null,
    driveFailures: Number(r.drive_failures ?? 0),
    admission: r.admission ?? null,
    createdAt: new Date(r.created_at).toISOString(),
  };
}

/** A run row and its step rows as the run view stored for it (no live state). */
export function viewFromRows(r: Row, stepRows: Row[], decisionOf: ReadonlyMap<string, Decision> = new Map()): RunView {
  const byId = new Map(stepRows.map((s) => [s.step_id, s]));
  const plan = r.plan as RunView["plan"];
  const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
  const stepViews = plan.steps.map((p) => {
    const s = byId.get(p.stepId);
    return {
      stepId: p.stepId,
      skillName: p.skillName,
      status: (s?.status ?? "pending") as StepStatus,
      dependsOn: [...p.dependsOn],
      attempts: s?.attempts ?? 0,
      input: s?.input ?? null,
      output: s?.output ?? null,
      error: s?.error_code ? { code: s.error_code, message: s.error_message ?? "" } : null,
      startedAt: iso(s?.started_at ?? null),
      finishedAt: iso(s?.finished_at ?? null),
      usedFallback: false,
      retrySuppressed: null,
      waitingFor: null,
      decision: decisionView(decisionOf.get(p.stepId)),
      rollback: s?.rollback_status ? { status: s.rollback_status, error: s.rollback_error ?? null } : null,
    };
  });
  return {
    runId: r.run_id,
    status: r.status as RunStatus,
    plan,
    context: r.context,
    memory: r.memory,
    result: r.result,
    error: r.error,
    steps: stepViews,
    pendingConfirmations: r.pending_confirmations,
    graph: exportPlanGraph(plan, (id) => byId.get(id)?.status),
    planning: r.planning ?? null,
    admission: r.admission ?? null,
    requestedBy: r.admission?.requestedBy ?? null,
    redrives: [],
    waitingFor: null,
    skillVersions: null,
    createdAt: new Date(r.created_at).toISOString(),
    updatedAt: new Date(r.updated_at).toISOString(),
  };
}
