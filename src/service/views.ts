/**
 * The run view as the API shows it: the runtime's view plus the run's traceId, and, for a run
 * executed by another process, the step statuses of the stored event projection (the other
 * process's graph state is only checkpointed when its scheduler node returns, so its step
 * statuses lag; the run store is updated with every event batch).
 */
import type { PendingConfirmation } from "../kernel/pending.js";
import { TERMINAL_RUN, TERMINAL_STEP, type StepStatus } from "../kernel/status.js";
import { exportPlanGraph } from "../plan/graph-export.js";
import type { Runtime } from "../runtime/runtime.js";
import type { RunView } from "../kernel/run-view.js";
import type { RunRow } from "../store/run-store.js";

export type ApiRunView = Omit<RunView, "runId" | "status"> & Pick<RunView, "runId" | "status"> & { traceId: string };

/** `{ runId, status, traceId, ... }` in that order. */
export function present(view: RunView, traceId: string): ApiRunView {
  const { runId, status, ...rest } = view;
  return { runId, status, traceId, ...rest };
}

const rank = (s: StepStatus) => (s === "pending" ? 0 : TERMINAL_STEP.has(s) ? 2 : 1);

/** Pure: newer statuses from the stored projection over a lagging checkpoint view. */
function overlayStored(
  view: RunView,
  stored: RunView | undefined,
  row: Pick<RunRow, "status" | "pendingConfirmations">,
): RunView {
  const byId = new Map(stored?.steps.map((s) => [s.stepId, s]) ?? []);
  const steps = view.steps.map((s) => {
    const o = byId.get(s.stepId);
    if (!o || rank(o.status) <= rank(s.status)) return s;
    return {
      ...s,
      status: o.status,
      attempts: Math.max(s.attempts, o.attempts),
      startedAt: s.startedAt ?? o.startedAt,
      finishedAt: o.finishedAt ?? s.finishedAt,
      error: s.error ?? o.error,
    };
  });
  const status = new Map(steps.map((s) => [s.stepId, s.status]));
  return {
    ...view,
    status: row.status,
    steps,
    pendingConfirmations: row.pendingConfirmations as PendingConfirmation[],
    graph: exportPlanGraph(view.plan, (id) => status.get(id)),
    updatedAt: stored && stored.updatedAt > view.updatedAt ? stored.updatedAt : view.updatedAt,
  };
}

export async function currentView(runtime: Runtime, row: RunRow): Promise<ApiRunView> {
  let { view, started } = await runtime.inspect(row.runId);
  // nobody executes a run that waits without a lease: its checkpoint is the whole truth
  const idle = view.status === "waiting_confirmation" && !row.leaseOwner;
  // not started (just recorded): the runtime built it from the store; the row's status is newer
  if (!TERMINAL_RUN.has(view.status) && !idle && (!started || !runtime.activeRuns().includes(row.runId))) {
    view = overlayStored(view, await runtime.store.getView(row.runId), row);
  }
  return present(view, row.traceId);
}
