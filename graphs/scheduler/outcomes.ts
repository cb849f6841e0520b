/**
 * What the loop does with each completion: the pure decision after an attempt
 * (src/kernel/after-attempt.ts) applied to the records, a preview parking its step, a backoff
 * ending in the next attempt.
 */
import { abortableSleep } from "../../src/kernel/sleep.js";
import { afterAttempt } from "../../src/kernel/after-attempt.js";
import { EventType } from "../../src/kernel/events.js";
import type { CompiledStep } from "../../src/plan/validate.js";
import { argsFor, begin, failUnit, startAttempt, unitOf } from "./attempt.js";
import type { Completion, SchedulerRun } from "./context.js";
import { applyDecision, offered, waitFor } from "./decisions.js";
import { reconcile, reconciled } from "./reconcile.js";

export function handle(run: SchedulerRun, item: Completion): void {
  if (item.kind === "wake") return;
  if (item.kind === "offer") return offered(run, item.id, item.decision);
  const c = run.step(item.id);
  switch (item.kind) {
    case "decision":
      return applyDecision(run, item.id, item.decision);
    case "preview": {
      const u = unitOf(run, c);
      if (!item.res.ok) return failUnit(run, c, u, item.res.error);
      if (run.halt) {
        run.sched.cancelRunning(c.id);
        run.set(c.id, { status: "cancelled", finishedAt: run.iso() });
        return;
      }
      // rounds are unique per step: 0 before the first attempt, n after step attempt n in doubt,
      // attempts + 1 before the fallback skill, attempts + 1 + k after fallback attempt k in doubt
      const round = u.unit === "step" ? 0 : run.rec(c.id).attempts + 1;
      const args = u.unit === "step" ? run.rec(c.id).input : run.rec(c.id).fallbackInput;
      return waitFor(run, c, {
        round,
        preview: item.res.preview,
        skillName: u.skill.name,
        args,
        fallback: u.unit === "fallback",
      });
    }
    case "retry": {
      if (run.halt) return run.cancelRunning(c, run.runError);
      if (run.draining) return; // the next segment starts the attempt (the step stays "retrying")
      const u = unitOf(run, c);
      const r = argsFor(run, c, u);
      if ("error" in r) return failUnit(run, c, u, r.error);
      return startAttempt(run, c, u, item.attempt, r.args);
    }
    case "reconciled":
      return reconciled(run, c, item.unit, item.attempt, item.res);
    case "attempt":
      return attempted(run, c, item);
  }
}

function attempted(run: SchedulerRun, c: CompiledStep, item: Extract<Completion, { kind: "attempt" }>): void {
  run.aborts.attempts.delete(c.id);
  const res = item.res;
  const u = unitOf(run, c);
  const fb = c.step.fallback;
  const next = afterAttempt({
    unit: item.unit,
    outcome: res.ok
      ? { ok: true, output: res.output }
      : "inDoubt" in res
        ? { ok: false, inDoubt: true }
        : { ok: false, error: res.error },
    // a redrive gives the step its retry budget again (attempt numbers themselves continue)
    attempt: item.unit === "step" ? item.attempt - (run.rec(c.id).attemptsBefore ?? 0) : item.attempt,
    halted: run.halt !== null,
    retry: c.retry,
    skill: u.skill,
    fallback: !fb ? undefined : "value" in fb ? "value" : "skill",
    random: run.env.random,
  });
  const error = res.ok ? undefined : res.error;
  switch (next.kind) {
    case "complete":
      if (item.unit === "step") {
        if (res.ok) run.env.registry.observeDuration(c.skill.name, res.durationMs);
        return run.completeStep(c, res.ok ? res.output : null);
      }
      return run.completeStep(c, res.ok ? res.output : null, {
        usedFallback: true,
        error: run.rec(c.id).fallbackOf,
        fallbackInDoubt: undefined,
      });
    case "reconcile":
      return reconcile(run, c, item.unit, item.attempt);
    case "cancelled":
      return run.cancelRunning(c, error!);
    case "retry":
      run.set(c.id, { status: "retrying", error });
      run.emit(
        EventType.step_retrying,
        c.id,
        { attempt: item.attempt, nextAttempt: item.attempt + 1, delayMs: next.delayMs, error },
        `${item.attempt}`,
      );
      run.track(
        abortableSleep(next.delayMs, run.aborts.halt.signal).catch(() => undefined),
        () => ({ kind: "retry", id: c.id, attempt: item.attempt + 1 }),
        () => ({ kind: "retry", id: c.id, attempt: item.attempt + 1 }),
      );
      return;
    case "fallback_value":
      // a value stands in for the output: no effect happened, nothing to compensate
      return run.completeStep(c, (fb as { value: unknown }).value ?? null, {
        usedFallback: true,
        error,
        ...(next.retrySuppressed ? { retrySuppressed: next.retrySuppressed } : {}),
      });
    case "fallback_skill":
      run.set(c.id, {
        fallbackOf: error,
        error,
        ...(next.retrySuppressed ? { retrySuppressed: next.retrySuppressed } : {}),
      });
      return begin(run, c);
    case "fail":
      if (item.unit === "fallback") return failUnit(run, c, u, error!);
      return run.finishFailed(c, error!, next.retrySuppressed ? { retrySuppressed: next.retrySuppressed } : {});
  }
}
