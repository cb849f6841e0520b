/**
 * What the CLI knows about a run while it draws it: the run view it started from, moved forward
 * by each numbered event (the same events locally and over SSE). Pure: no I/O, no clock.
 */
import type { RunEvent } from "../kernel/events.js";
import { runStatusAfter, STEP_STATUS_AFTER, stepsResetBy } from "../kernel/projection.js";
import type { StepError } from "../kernel/errors.js";
import type { RunStatus, StepStatus } from "../kernel/status.js";
import type { RunView } from "../kernel/run-view.js";

export interface StepState {
  stepId: string;
  skillName: string;
  dependsOn: string[];
  status: StepStatus;
  /** The attempt running or last run (0: never started). */
  attempt: number;
  /** First start of the step (ms since epoch). */
  startedAt?: number;
  finishedAt?: number;
  error?: StepError | null;
  /** One short line about what the step is doing or waiting for. */
  note?: string;
  /** The last decision taken on it ("approved: looks right"), kept after it ran. */
  decision?: string;
}

/** " by Ana Lopez" from an event's `by`. */
const byText = (by: unknown) => {
  const b = by as { id?: unknown; name?: unknown } | undefined;
  const who = typeof b?.name === "string" ? b.name : typeof b?.id === "string" ? b.id : undefined;
  return who ? ` by ${who}` : "";
};

export class RunModel {
  runId: string;
  status: RunStatus;
  goal: string | undefined;
  steps = new Map<string, StepState>();
  /** Plan order (the tree orders by dependencies, then by this). */
  order: string[] = [];
  createdAt: number | undefined;
  /** Time of the last event applied. */
  lastAt: number | undefined;
  /** Time the run spent waiting for a person, over the events applied (closed waits). */
  waitedMs = 0;
  /** While the run waits for a person: since when. */
  waitingSince: number | undefined;

  constructor(runId: string, status: RunStatus = "queued") {
    this.runId = runId;
    this.status = status;
  }

  /**
   * The run's own time up to `now`: from its creation, less the time it waited for a person (the
   * header while it runs and the closing line say the same thing).
   */
  workedMs(now: number, startedAt = this.createdAt): number | undefined {
    if (startedAt === undefined) return undefined;
    const open = this.waitingSince !== undefined ? Math.max(0, now - this.waitingSince) : 0;
    return Math.max(0, now - startedAt - this.waitedMs - open);
  }

  static fromView(view: RunView): RunModel {
    const m = new RunModel(view.runId, view.status);
    m.goal = view.plan.goal ?? undefined;
    const created = Date.parse(view.createdAt);
    m.createdAt = Number.isFinite(created) ? created : undefined;
    for (const s of view.steps) {
      m.order.push(s.stepId);
      m.steps.set(s.stepId, {
        stepId: s.stepId,
        skillName: s.skillName,
        dependsOn: [...s.dependsOn],
        status: s.status,
        attempt: s.attempts,
        // a step that waits for confirmation has not started yet, whatever its record says
        ...(s.startedAt && s.status !== "waiting_confirmation" && s.status !== "pending"
          ? { startedAt: Date.parse(s.startedAt) }
          : {}),
        ...(s.finishedAt ? { finishedAt: Date.parse(s.finishedAt) } : {}),
        error: s.error,
        ...(s.waitingFor ? { note: waitingForText(s.waitingFor) } : {}),
      });
    }
    return m;
  }

  /** A stored run: times from its events (when each attempt ran), statuses from its view (the truth). */
  static fromHistory(view: RunView, events: readonly RunEvent[]): RunModel {
    const m = new RunModel(view.runId, view.status);
    m.setPlan(view.plan);
    for (const e of events) m.apply(e);
    for (const s of view.steps)
      Object.assign(m.steps.get(s.stepId)!, { status: s.status, attempt: s.attempts, error: s.error });
    m.status = view.status;
    const created = Date.parse(view.createdAt);
    if (Number.isFinite(created)) m.createdAt = created;
    return m;
  }

  /** A plan known before the run (a file) or written by the planner (planning_completed). */
  setPlan(plan: { goal?: string; steps: { stepId: string; skillName: string; dependsOn?: string[] }[] }): void {
    if (plan.goal) this.goal = plan.goal;
    for (const s of plan.steps) {
      if (this.steps.has(s.stepId)) continue;
      this.order.push(s.stepId);
      this.steps.set(s.stepId, {
        stepId: s.stepId,
        skillName: s.skillName,
        dependsOn: [...(s.dependsOn ?? [])],
        status: "pending",
        attempt: 0,
      });
    }
  }

  apply(e: RunEvent): void {
    const at = Date.parse(e.at);
    this.lastAt = at;
    this.createdAt ??= at;
    const d = e.data;
    if (e.type === "planning_completed" && d.plan && typeof d.plan === "object")
      this.setPlan(d.plan as Parameters<RunModel["setPlan"]>[0]);
    const before = this.status;
    this.status = runStatusAfter(e, this.status) ?? this.status;
    if (this.status === "waiting_confirmation" && before !== "waiting_confirmation") this.waitingSince = at;
    if (this.status !== "waiting_confirmation" && this.waitingSince !== undefined) {
      this.waitedMs += Math.max(0, at - this.waitingSince);
      this.waitingSince = undefined;
    }
    for (const id of stepsResetBy(e)) {
      const r = this.steps.get(id);
      if (r) Object.assign(r, { status: "pending", finishedAt: undefined, note: undefined });
    }
    const s = e.stepId ? this.steps.get(e.stepId) : undefined;
    if (!s) return;
    const next = STEP_STATUS_AFTER[e.type];
    if (next) s.status = next;
    switch (e.type) {
      case "step_started":
        s.attempt = Number(d.attempt ?? s.attempt + 1);
        // the first attempt starts the clock (a confirmation wait before it does not count)
        if (s.attempt <= 1 || s.startedAt === undefined) s.startedAt = at;
        s.finishedAt = undefined;
        s.note = undefined;
        break;
      case "step_retrying": {
        const err = d.error as StepError | undefined;
        s.note = `attempt ${String(d.attempt)} failed${err ? ` (${err.code})` : ""}, retry in ${formatMs(Number(d.delayMs ?? 0))}`;
        break;
      }
      case "step_waiting_for_limit":
        s.note = waitingForText(d.waitingFor as Record<string, unknown> | undefined);
        break;
      case "step_waiting_confirmation":
        s.note = d.inDoubt ? "in doubt: was it done?" : "waiting for confirmation";
        break;
      case "step_confirmed":
        s.note = undefined;
        s.decision = `${String(d.decision)}${d.decision === "approve" ? "d" : d.decision === "reject" ? "ed" : ""}${byText(d.by)}${d.comment ? `: ${String(d.comment)}` : ""}`;
        break;
      case "step_completed":
      case "step_failed":
      case "step_cancelled":
        s.finishedAt = at;
        if (e.type === "step_failed") s.error = d.error as StepError;
        s.note = e.type === "step_completed" && d.markedDone ? "marked done" : undefined;
        break;
      case "step_skipped":
        s.note = d.because ? `skipped: ${String(d.because)} did not complete` : undefined;
        break;
      case "step_rolled_back":
        s.note = "compensated";
        break;
      case "step_rollback_failed":
        s.error = d.error as StepError;
        s.note = "compensation failed";
        break;
    }
  }

  list(): StepState[] {
    return this.order.map((id) => this.steps.get(id)!);
  }
}

function waitingForText(w: Record<string, unknown> | null | undefined): string {
  if (!w) return "waiting for a limit";
  if (w.serialKey !== undefined) return `waiting for serial key ${String(w.serialKey)}`;
  if (w.resource !== undefined) return `waiting for resource ${String(w.resource)}`;
  return `waiting for ${JSON.stringify(w)}`;
}

export function formatMs(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "";
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  const s = Math.round(ms / 1_000);
  if (s < 3_600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3_600)}h ${String(Math.floor((s % 3_600) / 60)).padStart(2, "0")}m`;
}

export interface TreeRow {
  stepId: string;
  /** Box-drawing prefix ("", "├─ ", "│  └─ ", …). */
  prefix: string;
  /** Dependencies other than the step's parent in the tree. */
  alsoAfter: string[];
}

/**
 * The plan's DAG as a tree: each step under the dependency that finishes deepest in the DAG (the
 * one it most likely waits for), its other dependencies named beside it; children in dependency
 * order. Every step appears exactly once.
 */
export function layoutTree(steps: readonly { stepId: string; dependsOn: readonly string[] }[]): TreeRow[] {
  const ids = new Set(steps.map((s) => s.stepId));
  const deps = new Map(steps.map((s) => [s.stepId, s.dependsOn.filter((d) => ids.has(d))]));
  // topological order, ties broken by plan order (a cycle, which validation refuses, falls back to plan order)
  const topo: string[] = [];
  const placed = new Set<string>();
  while (topo.length < steps.length) {
    const next =
      steps.find((s) => !placed.has(s.stepId) && deps.get(s.stepId)!.every((d) => placed.has(d))) ??
      steps.find((s) => !placed.has(s.stepId))!;
    placed.add(next.stepId);
    topo.push(next.stepId);
  }
  const rank = new Map(topo.map((id, i) => [id, i]));
  const depth = new Map<string, number>();
  const parent = new Map<string, string | undefined>();
  for (const id of topo) {
    let best: string | undefined;
    for (const d of deps.get(id)!) {
      if (!depth.has(d)) continue;
      if (
        best === undefined ||
        depth.get(d)! > depth.get(best)! ||
        (depth.get(d) === depth.get(best) && rank.get(d)! > rank.get(best)!)
      )
        best = d;
    }
    parent.set(id, best);
    depth.set(id, best === undefined ? 0 : depth.get(best)! + 1);
  }
  const children = new Map<string | undefined, string[]>();
  for (const id of topo) {
    const p = parent.get(id);
    children.set(p, [...(children.get(p) ?? []), id]);
  }
  const rows: TreeRow[] = [];
  const walk = (id: string, prefix: string, indent: string, isRoot: boolean, last: boolean) => {
    rows.push({
      stepId: id,
      prefix: isRoot ? "" : `${indent}${last ? "└─ " : "├─ "}`,
      alsoAfter: deps.get(id)!.filter((d) => d !== parent.get(id)),
    });
    const kids = children.get(id) ?? [];
    const childIndent = isRoot ? "" : `${indent}${last ? "   " : "│  "}`;
    kids.forEach((k, i) => walk(k, prefix, childIndent, false, i === kids.length - 1));
  };
  for (const root of children.get(undefined) ?? []) walk(root, "", "", true, true);
  return rows;
}
