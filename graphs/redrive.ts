/**
 * Redrive, pure: which steps of a failed run run again and the state update that makes them.
 * Completed steps keep their records (and outputs) and are never launched again; failed,
 * skipped-because-of-failure, cancelled and not-started steps go back to `pending` with their
 * attempt counts (so attempt numbers continue and intent claims stay unique), the same
 * idempotency keys (`runId:stepId`, attempt.ts), and a `redrive` generation that keys their
 * events apart from the first generation's. A non-idempotent step whose last attempt may have
 * had its effect is marked `redriveInDoubt`: the scheduler asks its reconcile (else a person)
 * before any new attempt, as after a crash.
 *
 * This is a continuation of the run's own checkpoint (the runtime writes the update as the planner
 * node, so the next node is the scheduler), not LangGraph's replay/fork, which re-executes every
 * node after an old checkpoint, effects included.
 */
import type { Acting } from "../src/kernel/actor.js";
import { ErrorCode, ToolchainError } from "../src/kernel/errors.js";
import { REDRIVABLE_RUN, type StepStatus } from "../src/kernel/status.js";
import { confirmationRequired } from "../src/kernel/confirmation.js";
import { hasSideEffects, type Skill } from "../src/skills/contract.js";
import { skillVersion } from "../src/skills/version.js";
import type { RedriveRecord, RunState, RunUpdate, StepRecord } from "./state.js";

export type { RedriveRecord } from "./state.js";

/** Per-step argument overrides for failed steps: top-level fields replace the last attempt's. */
export type RedriveOverrides = Record<string, Record<string, unknown>>;

const RERUN: ReadonlySet<StepStatus> = new Set<StepStatus>([
  "failed",
  "skipped",
  "cancelled",
  "pending",
  "running",
  "retrying",
]);

export { REDRIVABLE_RUN } from "../src/kernel/status.js";

const refuse = (code: ErrorCode, message: string, details?: unknown) =>
  new ToolchainError(code, message, details === undefined ? {} : { details });

export interface RedrivePlan {
  update: RunUpdate;
  record: RedriveRecord;
}

/**
 * The update that redrives `state`, or a coded refusal. `skillOf` resolves the plan's skills
 * (overrides are validated against their input schema).
 */
export function planRedrive(
  state: RunState,
  skillOf: (name: string) => Skill | undefined,
  overrides: RedriveOverrides,
  acting: Acting,
  at: string,
): RedrivePlan {
  if (!REDRIVABLE_RUN.has(state.status))
    throw refuse(
      ErrorCode.RUN_NOT_REDRIVABLE,
      `run ${state.runId} is ${state.status}: only a failed run can be redriven`,
      {
        status: state.status,
      },
    );
  const recs = state.steps ?? {};
  const undone = Object.entries(recs).filter(([, r]) => r.rollback && r.rollback !== "not_needed");
  if (undone.length)
    throw refuse(
      ErrorCode.REDRIVE_COMPENSATED,
      `run ${state.runId} was compensated (${undone.map(([id]) => `"${id}"`).join(", ")}): a redrive would run steps whose effects were undone`,
      { steps: undone.map(([id]) => id) },
    );
  const rec = (id: string): StepRecord => recs[id] ?? { status: "pending", attempts: 0 };
  // a person's rejection stands: the rejected step and what depends on it are not run again
  const kept = new Set<string>();
  for (const s of state.plan.steps) {
    const r = rec(s.stepId);
    if (r.status === "failed" && r.error?.code === ErrorCode.REJECTED) kept.add(s.stepId);
  }
  const order = state.plan.steps; // validated plans list dependencies first? not guaranteed: iterate to a fixpoint
  for (let changed = true; changed;) {
    changed = false;
    for (const s of order)
      if (!kept.has(s.stepId) && s.dependsOn.some((d) => kept.has(d)) && rec(s.stepId).status !== "completed") {
        kept.add(s.stepId);
        changed = true;
      }
  }
  const rerun = order.map((s) => s.stepId).filter((id) => !kept.has(id) && RERUN.has(rec(id).status));
  for (const id of Object.keys(overrides)) {
    if (!order.some((s) => s.stepId === id))
      throw refuse(ErrorCode.INVALID_REDRIVE, `overrides.${id}: the plan has no step "${id}"`);
    if (rec(id).status !== "failed" || !rerun.includes(id))
      throw refuse(
        ErrorCode.INVALID_REDRIVE,
        `overrides.${id}: only a failed step's arguments can be overridden (step "${id}" is ${rec(id).status})`,
      );
  }
  if (!rerun.length)
    throw refuse(ErrorCode.RUN_NOT_REDRIVABLE, `run ${state.runId} has no step a redrive could run again`, {
      status: state.status,
    });
  const n = (state.redrives?.length ?? 0) + 1;
  const steps: Record<string, StepRecord> = {};
  const inDoubt: string[] = [];
  const changed: RedriveRecord["overrides"] = {};
  for (const id of rerun) {
    const r = rec(id);
    const planned = order.find((s) => s.stepId === id)!;
    const skill = skillOf(planned.skillName);
    let approved = r.approvedArguments;
    const o = overrides[id];
    if (o) {
      const base = (r.approvedArguments ?? r.input ?? {}) as Record<string, unknown>;
      const next = { ...base, ...o };
      const parsed = skill?.input.safeParse(next);
      if (!parsed?.success)
        throw refuse(
          ErrorCode.INVALID_REDRIVE,
          `overrides.${id}: the arguments do not match ${planned.skillName}: ${
            parsed?.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`).join("; ") ??
            "unknown skill"
          }`,
        );
      // new arguments for a step that asks first need a person's confirmation under its approval policy:
      // a redrive (an operator's, an agent's through MCP) cannot stand in for it
      if (confirmationRequired(skill!, next, planned.requireConfirmation, false))
        throw refuse(
          ErrorCode.INVALID_REDRIVE,
          `overrides.${id}: step "${id}" (${planned.skillName}) asks for confirmation, so a redrive cannot give it new arguments; redrive it as approved, or start a new run`,
        );
      changed[id] = Object.fromEntries(Object.entries(o).map(([k, v]) => [k, { from: base[k] ?? null, to: v }]));
      // the redriving operator stands behind these arguments: they are what the step runs with
      approved = next;
    }
    const doubt =
      !o &&
      r.attempts > 0 &&
      (r.status === "failed" || r.status === "cancelled" || r.status === "running") &&
      skill !== undefined &&
      hasSideEffects(skill) &&
      !skill.idempotent &&
      r.error?.effectStarted !== false;
    if (doubt) inDoubt.push(id);
    steps[id] = {
      status: "pending",
      attempts: r.attempts,
      ...(r.fallbackAttempts !== undefined ? { fallbackAttempts: r.fallbackAttempts } : {}),
      ...(r.input !== undefined ? { input: r.input } : {}),
      ...(approved ? { approvedArguments: approved } : {}),
      ...(r.waitRound !== undefined ? { waitRound: r.waitRound } : {}),
      // overridden arguments were validated against this version; else they keep the version they were for
      ...(o && skill
        ? { argsVersion: { skill: skill.name, ...skillVersion(skill) } }
        : r.argsVersion
          ? { argsVersion: r.argsVersion }
          : {}),
      ...(doubt ? { redriveInDoubt: true } : {}),
      attemptsBefore: r.attempts,
      redrive: n,
    };
  }
  const record: RedriveRecord = { n, at, by: acting.by, via: acting.via, steps: rerun, inDoubt, overrides: changed };
  return {
    record,
    update: {
      steps,
      status: "running",
      error: null,
      halt: null,
      rollbackBlocked: null,
      rollbackDecision: null,
      segmentEnded: false,
      redrives: [record],
      // a fresh execution budget: a run that failed on its deadline would otherwise halt at once
      elapsedMs: 0,
      updatedAt: at,
    },
  };
}
