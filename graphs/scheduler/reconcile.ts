/**
 * An attempt in doubt (its process died between the intent claim and the saved result): ask the
 * skill that ran it (durably, one task per attempt) whether its effect happened; if it cannot
 * tell, a person decides (approve = run it again, mark_done = it happened, reject = fail).
 * Under a halt (cancel, fail_fast, deadline) nothing runs again: not applied ends it cancelled,
 * unknown ends it failed with EFFECT_UNKNOWN.
 */
import { DEFAULT_WORKSPACE } from "../../src/kernel/workspace.js";
import { ErrorCode, toStepError } from "../../src/kernel/errors.js";
import type { Unit } from "../../src/kernel/after-attempt.js";
import { unstorableResult } from "../../src/kernel/storable.js";
import type { CompiledStep } from "../../src/plan/validate.js";
import { callDurable } from "../durable-task.js";
import { argsFor, startAttempt, unitOf } from "./attempt.js";
import { effectUnknown, type Reconciled, type SchedulerRun } from "./context.js";
import { waitFor } from "./decisions.js";

export function reconcile(run: SchedulerRun, c: CompiledStep, unit: Unit, attempt: number): void {
  const u = unitOf(run, c);
  const rc = u.skill.reconcile;
  const r = run.rec(c.id);
  const input = unit === "fallback" ? r.fallbackInput : r.input;
  run.track(
    callDurable(
      run.config,
      { kind: unit === "fallback" ? "reconcile_fallback" : "reconcile", stepId: c.id, stepIndex: c.index, attempt },
      async (): Promise<Reconciled> => {
        if (!rc) return { unknown: true };
        try {
          const res = await rc({
            runId: run.runId,
            stepId: c.id,
            idempotencyKey: u.idempotencyKey,
            workspaceId: run.state.workspaceId ?? DEFAULT_WORKSPACE,
            input,
            signal: run.aborts.halt.signal,
            logger: run.env.logger(run.runId, c.id),
          });
          const bad =
            res && "applied" in res && res.applied ? unstorableResult(res.output, "output", u.skill.name) : undefined;
          return bad ? { unknown: true, error: bad } : (res ?? { unknown: true });
        } catch (e) {
          return { unknown: true, error: toStepError(e) };
        }
      },
    ),
    (res) => ({ kind: "reconciled", id: c.id, unit, attempt, res }),
    (e) => ({ kind: "reconciled", id: c.id, unit, attempt, res: { unknown: true, error: toStepError(e) } }),
  );
}

export function reconciled(run: SchedulerRun, c: CompiledStep, unit: Unit, attempt: number, res: Reconciled): void {
  const fallback = unit === "fallback";
  const original = fallback ? (run.rec(c.id).fallbackOf ?? run.rec(c.id).error) : undefined;
  if ("applied" in res && res.applied)
    return run.completeStep(c, res.output ?? null, {
      inDoubt: false,
      ...(fallback ? { usedFallback: true, error: original, fallbackInDoubt: undefined } : {}),
    });
  if ("applied" in res && !res.applied) {
    // the effect did not happen: the next attempt of the same unit is safe, unless the run halted
    if (run.halt)
      return run.cancelRunning(c, {
        code: ErrorCode.CANCELLED,
        message: `not run: ${run.runError?.message ?? "the run halted"} (its skill's reconcile says ${label(unit, attempt)} had no effect)`,
        effectStarted: false,
      });
    const u = unitOf(run, c);
    const a = argsFor(run, c, u);
    if ("args" in a) return startAttempt(run, c, u, attempt + 1, a.args);
  }
  // nobody may run it again under a halt, and a wait would be cancelled with the run
  if (run.halt) {
    const why = "error" in res && res.error ? { reconcileError: res.error } : {};
    const fb = fallback ? { fallback: unitOf(run, c).skill.name } : {};
    return run.finishFailed(
      c,
      effectUnknown(unit, attempt, { ...fb, ...why }),
      fallback ? { fallbackInDoubt: undefined } : {},
    );
  }
  const round = fallback ? run.rec(c.id).attempts + 1 + attempt : attempt;
  const u = unitOf(run, c);
  const preview = {
    inDoubt: true,
    attempt,
    ...(fallback ? { fallback: u.skill.name } : {}),
    reason: `the process running this ${fallback ? "step's fallback" : "step"} stopped before its result was saved`,
    ...("error" in res && res.error ? { reconcileError: res.error } : {}),
  };
  waitFor(
    run,
    c,
    { round, preview, skillName: c.skill.name, args: run.rec(c.id).input, inDoubt: true },
    fallback ? { fallbackInDoubt: attempt, error: original } : {},
  );
}

const label = (unit: Unit, attempt: number) =>
  unit === "fallback" ? `fallback attempt ${attempt}` : `attempt ${attempt}`;
