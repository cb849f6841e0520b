/**
 * The attempt path of a step: what runs (its own skill, or its fallback skill once the skill
 * failed for good), with which arguments, whether a person must confirm it first (then its
 * preview is computed for the skill that will actually run), and the durable attempt task, which
 * executes through `executeSkill`. A fallback skill goes through exactly the same gates as a
 * step's skill: confirmation, preview, allowlist, limits, intent claims, timeout.
 */
import { DEFAULT_WORKSPACE } from "../../src/kernel/workspace.js";
import { ErrorCode, toStepError, type StepError } from "../../src/kernel/errors.js";
import { EventType } from "../../src/kernel/events.js";
import type { Unit } from "../../src/kernel/after-attempt.js";
import { confirmationRequired } from "../../src/kernel/confirmation.js";
import { resolveArguments } from "../../src/plan/refs.js";
import type { CompiledStep } from "../../src/plan/validate.js";
import { hasSideEffects, type Skill } from "../../src/skills/contract.js";
import { computePreview } from "../../src/skills/preview.js";
import { callDurable } from "../durable-task.js";
import type { StepRecord } from "../state.js";
import { isNotRun, notRun, type Completion, type SchedulerRun } from "./context.js";
import { executeSkill, holdsLimits, inDoubtResult } from "./execute.js";
import { skillVersion } from "../../src/skills/version.js";
import { migrateArguments } from "../../src/skills/migrate-arguments.js";

/** One thing a step may execute, as the attempt path sees it. */
export interface UnitSpec {
  unit: Unit;
  skill: Skill;
  /** Arguments as planned (references not resolved yet), and where they sit in the plan. */
  template: Record<string, unknown>;
  field: "arguments" | "fallback.arguments";
  /** Arguments a person approved for this unit (skips the confirmation). */
  approved: Record<string, unknown> | undefined;
  /** The plan's `requireConfirmation` (a fallback has none: its skill's own rule holds). */
  planned: boolean | undefined;
  intentKey: string;
  idempotencyKey: string;
  nextAttempt: number;
}

/** The step's own skill failed for good: its fallback skill is what runs or waits now. */
export function inFallback(r: StepRecord): boolean {
  return r.fallbackOf !== undefined || r.fallbackInDoubt !== undefined;
}

export function unitOf(run: SchedulerRun, c: CompiledStep): UnitSpec {
  const r = run.rec(c.id);
  const fb = c.step.fallback;
  if (inFallback(r) && fb && "skillName" in fb) {
    return {
      unit: "fallback",
      skill: run.env.registry.get(fb.skillName)!,
      template: fb.arguments ?? {},
      field: "fallback.arguments",
      approved: r.fallbackApprovedArguments,
      planned: undefined,
      intentKey: `${c.id}#fallback`,
      idempotencyKey: `${run.runId}:${c.id}:fallback`,
      nextAttempt: (r.fallbackAttempts ?? 0) + 1,
    };
  }
  return {
    unit: "step",
    skill: c.skill,
    template: c.step.arguments,
    field: "arguments",
    approved: r.approvedArguments,
    planned: c.step.requireConfirmation,
    intentKey: c.id,
    idempotencyKey: `${run.runId}:${c.id}`,
    nextAttempt: r.attempts + 1,
  };
}

/** Arguments are resolved once per unit when it is about to start (its inputs are final then). */
export function argsFor(run: SchedulerRun, c: CompiledStep, u: UnitSpec) {
  const key = `${u.unit}:${c.id}`;
  let r = run.argCache.get(key);
  if (!r) {
    try {
      const base = u.approved ?? u.template;
      const resolved = resolveArguments(
        base,
        { context: run.state.context, memory: run.memory, steps: run.outputs },
        u.field,
        { stepId: c.id },
      );
      const m = migrated(run, c, u, resolved);
      r = m.ok ? { args: m.args } : { error: { ...m.error, effectStarted: false } };
    } catch (e) {
      r = { error: { ...toStepError(e), effectStarted: false } };
    }
    run.argCache.set(key, r);
  }
  return r;
}

/**
 * Arguments resolved for the version they were recorded for (an approver's: the record's
 * `argsVersion`; else the run's pin) carried to this process's version (src/skills/migrate-arguments.ts).
 */
function migrated(run: SchedulerRun, c: CompiledStep, u: UnitSpec, args: Record<string, unknown>) {
  const recorded = run.rec(c.id).argsVersion;
  const from =
    (u.approved !== undefined && recorded?.skill === u.skill.name ? recorded : undefined) ??
    run.state.skillVersions?.[u.skill.name];
  return from ? migrateArguments(u.skill, args, from) : ({ ok: true, args } as const);
}

/** The unit failed before or while running: a fallback's failure fails the step with its original error. */
export function failUnit(
  run: SchedulerRun,
  c: CompiledStep,
  u: UnitSpec,
  error: StepError,
  how: "fail" | "parked" = "fail",
): void {
  if (u.unit === "step") return run.finishFailed(c, error, {}, how);
  const original = run.rec(c.id).fallbackOf ??
    run.rec(c.id).error ?? { code: ErrorCode.EXECUTION_FAILED, message: "step failed" };
  run.finishFailed(c, { ...original, details: { fallbackError: error } }, { fallbackInDoubt: undefined }, how);
}

/** A step the Scheduler just started (or unparked after a decision). */
export function launch(run: SchedulerRun, id: string): void {
  run.launched++;
  begin(run, run.step(id));
}

/** Start the step's current unit: ask first when a person must confirm it, else attempt it. */
export function begin(run: SchedulerRun, c: CompiledStep): void {
  const u = unitOf(run, c);
  const r = argsFor(run, c, u);
  if ("error" in r) return failUnit(run, c, u, r.error);
  if (confirmationRequired(u.skill, r.args, u.planned, u.approved !== undefined)) return askFirst(run, c, u, r.args);
  startAttempt(run, c, u, u.nextAttempt, r.args);
}

function running(run: SchedulerRun, id: string): Partial<StepRecord> {
  const r = run.rec(id);
  return { ...(r.status === "running" ? {} : { status: "running" as const }), startedAt: r.startedAt ?? run.iso() };
}
const inputOf = (u: UnitSpec, args: Record<string, unknown>): Partial<StepRecord> =>
  u.unit === "step" ? { input: args } : { fallbackInput: args };

/** The preview of the skill that will run, as a durable task; the outcome parks the step. */
function askFirst(run: SchedulerRun, c: CompiledStep, u: UnitSpec, args: Record<string, unknown>): void {
  // the arguments are this process's version's now, and so is the preview its approver sees
  const version = { skill: u.skill.name, ...skillVersion(u.skill) };
  run.set(c.id, { ...running(run, c.id), ...inputOf(u, args), argsVersion: version, waitVersion: version });
  const parsed = u.skill.input.safeParse(args);
  if (!parsed.success) {
    return failUnit(run, c, u, {
      code: ErrorCode.INVALID_INPUT,
      message: `input does not match ${u.skill.name}: ${parsed.error.issues.map((i) => i.message).join("; ")}`,
      effectStarted: false,
    });
  }
  const runId = run.runId;
  run.track(
    callDurable(
      run.config,
      { kind: u.unit === "step" ? "preview" : "preview_fallback", stepId: c.id, stepIndex: c.index },
      async () =>
        run.harvesting
          ? notRun()
          : computePreview(u.skill, parsed.data, {
              runId,
              stepId: c.id,
              idempotencyKey: u.idempotencyKey,
              signal: run.aborts.halt.signal,
              logger: run.env.logger(runId, c.id),
              context: run.state.context,
              workspaceId: run.state.workspaceId ?? DEFAULT_WORKSPACE,
            }),
    ),
    (res) => ({ kind: "preview", id: c.id, unit: u.unit, res }),
    (e) => ({ kind: "preview", id: c.id, unit: u.unit, res: { ok: false, error: toStepError(e) } }),
  );
}

/** Attempt n of the unit, as a durable task: replay returns its saved result instead of running it again. */
export function startAttempt(
  run: SchedulerRun,
  c: CompiledStep,
  u: UnitSpec,
  attempt: number,
  args: Record<string, unknown>,
): void {
  const ctl = new AbortController();
  run.aborts.attempts.set(c.id, ctl);
  if (u.unit === "step") run.set(c.id, { ...running(run, c.id), attempts: attempt, input: args, inDoubt: false });
  else
    run.set(c.id, {
      ...running(run, c.id),
      fallbackAttempts: attempt,
      fallbackInput: args,
      inDoubt: false,
      fallbackInDoubt: undefined,
    });
  const started =
    u.unit === "step"
      ? () => run.emit(EventType.step_started, c.id, { attempt, skillName: u.skill.name }, `${attempt}`)
      : () => run.emit(EventType.step_fallback_started, c.id, { attempt, skillName: u.skill.name }, `${attempt}`);
  if (!holdsLimits(run.env, u.skill, args) && !run.harvesting) started();
  const label = u.unit === "step" ? `attempt ${attempt}` : `fallback attempt ${attempt}`;
  const task = callDurable(
    run.config,
    { kind: u.unit === "step" ? "step" : "fallback", stepId: c.id, stepIndex: c.index, attempt },
    // the attempt's own promise (no async frame around it: LangGraph's task awaits it)
    () =>
      run.harvesting
        ? harvested(run, u, attempt, label)
        : executeSkill(run.env, run.emit, {
            skill: u.skill,
            args,
            runId: run.runId,
            stepId: c.id,
            attempt,
            intentKey: u.intentKey,
            idempotencyKey: u.idempotencyKey,
            context: run.state.context,
            workspaceId: run.state.workspaceId,
            allowed: run.state.allowedSkills,
            signal: ctl.signal,
            timeoutMs: c.step.timeoutMs,
            started,
            label,
          }),
  );
  run.track(
    task,
    (res) => {
      const item: Completion = { kind: "attempt", id: c.id, unit: u.unit, attempt, res };
      // a result saved by the dead process, replayed while harvesting: the attempt ran there, and
      // the event batch with its start may have died with it; the key makes this a no-op when it
      // was stored (the crash-point suite found "completed before it started" after a kill at a
      // lease beat). Not for one in doubt: reconcile decides what happened, nothing starts here.
      if (run.harvesting && !isNotRun(item) && !("inDoubt" in res && res.inDoubt)) started();
      return item;
    },
    (e) => ({
      kind: "attempt",
      id: c.id,
      unit: u.unit,
      attempt,
      res: { ok: false, durationMs: 0, error: toStepError(e) },
    }),
  );
}

/**
 * An attempt without a saved result while a cancelled run is harvested: not run, unless the dead
 * process claimed its intent (a non-idempotent effect), which may have happened. That one is in
 * doubt and goes through reconcile like after any crash (the intent is read, not claimed).
 */
async function harvested(run: SchedulerRun, u: UnitSpec, attempt: number, label: string) {
  const claimed =
    hasSideEffects(u.skill) &&
    !u.skill.idempotent &&
    (await run.env.intents.hasIntent(run.runId, u.intentKey, attempt));
  return claimed ? inDoubtResult(label) : notRun();
}
