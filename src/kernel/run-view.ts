/** The run view: one shape for the library, the API and the CLI, derived from graph state. */
import type { PlanningRecord, RedriveRecord, RunState, StepRecord } from "./run-state.js";
import type { SkillVersion, VersionGap } from "./skill-version.js";
import { pendingConfirmations, type PendingConfirmation } from "./pending.js";
import type { Decision } from "./decision.js";
import type { StepError } from "./errors.js";
import type { Admission, Requester } from "../plan/admission.js";
import type { WaitingFor } from "./limits.js";
import type { RollbackStatus, RunStatus, StepStatus } from "./status.js";
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
  return {
    decision: d.decision,
    by: d.by ?? null,
    via: d.via ?? null,
    at: d.at ?? null,
    comment: d.comment ?? null,
    ...(d.approvals?.length ? { approvals: d.approvals } : {}),
  };
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
  /** Set while no process at hand has a compatible version of a skill the run is pinned to (it waits for one). */
  waitingFor: { skillVersion: VersionGap } | null;
  /** The version of each skill the run was planned against (name → declared version and schema hash). */
  skillVersions: Record<string, SkillVersion> | null;
  /** Each redrive of the run, in order: who, through which surface, which steps ran again, what arguments changed. */
  redrives: RedriveRecord[];
  createdAt: string;
  updatedAt: string;
}

const OUTPUT_KEPT = new Set<StepStatus>(["completed", "rolled_back", "rollback_failed"]);

export function buildRunView(state: RunState): RunView {
  // a run started from a request has no plan until the planner node wrote it
  const s = state.plan
    ? state
    : {
        ...state,
        plan: {
          goal: state.request,
          steps: [],
          onFailure: "skip_dependents",
          rollbackMode: "best_effort",
        } as unknown as RunState["plan"],
      };
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
    redrives: s.redrives ?? [],
    waitingFor: null,
    skillVersions: s.skillVersions ?? null,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  };
}
