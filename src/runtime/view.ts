/** The run view: one shape for the library, the API and the CLI, derived from graph state. */
import type { PlanningRecord, RunState, StepRecord } from "../../graphs/state.js";
import { pendingConfirmations } from "../../graphs/approval-node.js";
import type { PendingConfirmation } from "../kernel/pending.js";
import type { Decision } from "../kernel/decision.js";
import type { StepError } from "../kernel/errors.js";
import type { Admission, Requester } from "../plan/admission.js";
import type { WaitingFor } from "../kernel/limits.js";
import type { RollbackStatus, RunStatus, StepStatus } from "../kernel/status.js";
import { exportPlanGraph, type PlanGraph } from "../plan/graph-export.js";
import type { ToolChainPlan } from "../plan/schema.js";

export interface StepView {
  stepId: string;
  skillName: string;
  status: StepStatus;
  dependsOn: string[];
  attempts: number;
  input: unknown;
  output: unknown;
  error: StepError | null;
  startedAt: string | null;
  finishedAt: string | null;
  usedFallback: boolean;
  retrySuppressed: string | null;
  rollback: { status: RollbackStatus; error: StepError | null } | null;
  /** Set while the step waits for a serial key or resource held by other steps (it has not started). */
  waitingFor: WaitingFor | null;
  /** The last decision applied to the step: what, who, through which surface, when. */
  decision: DecisionView | null;
}

export interface DecisionView {
  decision: Decision["decision"];
  by: Decision["by"] | null;
  via: Decision["via"] | null;
  at: string | null;
  comment: string | null;
  approvals?: Decision["approvals"];
}

export function decisionView(d: Decision | undefined): DecisionView | null {
  if (!d) return null;
  return { decision: d.decision, by: d.by ?? null, via: d.via ?? null, at: d.at ?? null, comment: d.comment ?? null, ...(d.approvals?.length ? { approvals: d.approvals } : {}) };
}

export interface RunView {
  runId: string;
  status: RunStatus;
  plan: ToolChainPlan;
  context: unknown;
  memory: Record<string, unknown>;
  result: { outputs: Record<string, unknown>; memory: Record<string, unknown> } | null;
  error: StepError | null;
  steps: StepView[];
  pendingConfirmations: PendingConfirmation[];
  graph: PlanGraph;
  /** Which planner wrote the plan and why the fallback ran (null: the caller gave the plan). */
  planning: PlanningRecord | null;
  /** Who wrote the plan (a person, the model, an agent), through which surface, and what admission clamped. */
  admission: Admission | null;
  /** Who started the run, through which surface (null: a run recorded before principals existed). */
  requestedBy: Requester | null;
  createdAt: string;
  updatedAt: string;
}

const OUTPUT_KEPT = new Set<StepStatus>(["completed", "rolled_back", "rollback_failed"]);

export function buildRunView(state: RunState): RunView {
  // a run started from a request has no plan until the planner node wrote it
  const s = state.plan ? state : { ...state, plan: { goal: state.request, steps: [], onFailure: "skip_dependents", rollbackMode: "best_effort" } as unknown as RunState["plan"] };
  const rec = (id: string): StepRecord => s.steps[id] ?? { status: "pending", attempts: 0 };
  const steps: StepView[] = s.plan.steps.map((p) => {
    const r = rec(p.stepId);
    return {
      stepId: p.stepId,
      skillName: p.skillName,
      status: r.status,
      dependsOn: [...p.dependsOn],
      attempts: r.attempts,
      input: r.input ?? null,
      output: r.output ?? null,
      error: r.error ?? null,
      startedAt: r.startedAt ?? null,
      finishedAt: r.finishedAt ?? null,
      usedFallback: r.usedFallback ?? false,
      retrySuppressed: r.retrySuppressed ?? null,
      rollback: r.rollback ? { status: r.rollback, error: r.rollbackError ?? null } : null,
      waitingFor: null,
      decision: decisionView(s.decisions?.[p.stepId]),
    };
  });
  const terminal = ["completed", "failed", "cancelled", "rolled_back", "rollback_failed"].includes(s.status);
  const outputs: Record<string, unknown> = {};
  for (const st of steps) if (OUTPUT_KEPT.has(st.status)) outputs[st.stepId] = st.output;
  return {
    runId: s.runId,
    status: s.status,
    plan: s.plan,
    context: s.context ?? null,
    memory: s.memory,
    result: terminal ? { outputs, memory: s.memory } : null,
    error: s.error ?? null,
    steps,
    pendingConfirmations: pendingConfirmations(s),
    graph: exportPlanGraph(s.plan, (id) => rec(id).status),
    planning: s.planning ?? null,
    admission: s.admission ?? null,
    requestedBy: s.admission?.requestedBy ?? null,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  };
}
