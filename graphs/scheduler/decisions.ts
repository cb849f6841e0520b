/**
 * Waits and the decisions that answer them. A step waits in a round (0: before its first
 * attempt; n: in doubt after attempt n; attempts + 1: before its fallback skill; attempts + 1 + k:
 * its fallback attempt k in doubt). A decision answers exactly one (step, round): an old decision
 * still in state never answers a later wait. Decisions that arrive while the node runs (the
 * inbox, RunControls) are recorded as pinned durable tasks before they apply, so a replay applies
 * the same decision.
 */
import { ErrorCode, type StepError } from "../../src/kernel/errors.js";
import { EventType } from "../../src/kernel/events.js";
import { deadlineOf, policyOfWait, workspaceDefault } from "../../src/kernel/approval-policy.js";
import { DEFAULT_WORKSPACE } from "../../src/kernel/workspace.js";
import type { CompiledStep } from "../../src/plan/validate.js";
import { callDurable } from "../durable-task.js";
import { skillVersion } from "../../src/skills/version.js";
import type { Decision, StepRecord } from "../state.js";
import { inFallback, unitOf } from "./attempt.js";
import type { SchedulerRun } from "./context.js";

export interface Wait {
  round: number;
  preview: unknown;
  skillName: string;
  args: unknown;
  fallback?: boolean;
  inDoubt?: boolean;
}

/** Park the step in a wait and tell the world; a decision that came early answers it now. */
export function waitFor(run: SchedulerRun, c: CompiledStep, w: Wait, extra: Partial<StepRecord> = {}): void {
  run.set(c.id, {
    status: "waiting_confirmation",
    waitRound: w.round,
    preview: w.preview,
    ...(w.inDoubt ? { inDoubt: true } : {}),
    ...extra,
  });
  run.sched.park(c.id);
  // a confirmation under a policy with an expiry: the deadline travels in the event, so the run
  // row holds it durably (src/store/projection.ts) for any process's expiry sweep; the event log
  // keeps the first wait's event, so a replay does not move the deadline. In-doubt waits never
  // expire: whether an effect happened is not a question a timer may answer.
  const deadline = w.inDoubt
    ? undefined
    : deadlineOf(
        policyOfWait(
          {
            skillOf: (n) => run.env.registry.get(n),
            plan: run.plan,
            floor: workspaceDefault(run.env.approvalDefaults, run.state.workspaceId ?? DEFAULT_WORKSPACE),
          },
          { stepId: c.id, skillName: w.skillName },
        ),
        run.env.now(),
      );
  run.emit(
    EventType.step_waiting_confirmation,
    c.id,
    {
      skillName: w.skillName,
      arguments: w.args,
      preview: w.preview,
      round: w.round,
      ...(w.inDoubt ? { inDoubt: true } : {}),
      ...(w.fallback ? { fallback: true } : {}),
      ...(deadline ?? {}),
    },
    `${w.round}`,
  );
  const early = run.early.get(c.id);
  if (early && answers(run, c.id, early)) {
    run.early.delete(c.id);
    consume(run, c, early);
  }
}

export function answers(run: SchedulerRun, id: string, d: Decision): boolean {
  return run.rec(id).status === "waiting_confirmation" && d.round === (run.rec(id).waitRound ?? 0);
}

/** Record the decision durably (a pinned task), then apply it when the task returns. */
function consume(run: SchedulerRun, c: CompiledStep, d: Decision): void {
  run.track(
    callDurable(run.config, { kind: "decision", stepId: c.id, stepIndex: c.index, round: d.round ?? 0 }, async () => d),
    (rd) => ({ kind: "decision", id: c.id, decision: rd }),
    () => ({ kind: "decision", id: c.id, decision: d }),
  );
}

/** A decision handed over by the runtime while this node runs. */
export function offered(run: SchedulerRun, stepId: string, d: Decision): void {
  const c = run.compiled.byId.get(stepId);
  if (!c) return;
  if (answers(run, stepId, d)) consume(run, c, d);
  else if (run.rec(stepId).status !== "waiting_confirmation") run.early.set(stepId, d); // it will wait soon
  // else: a decision for another round of this step (stale): ignored
}

/** Who decided, for the audit trail (decisions recorded before principals existed carry none). */
function who(d: Decision): Record<string, unknown> {
  return {
    ...(d.by ? { by: d.by } : {}),
    ...(d.via ? { via: d.via } : {}),
    ...(d.approvals?.length ? { approvals: d.approvals } : {}),
  };
}

export function applyDecision(run: SchedulerRun, id: string, d: Decision): void {
  const c = run.compiled.byId.get(id);
  if (!c || !answers(run, id, d) || run.halt) return;
  const r = run.rec(id);
  const inDoubt = r.inDoubt === true;
  const u = unitOf(run, c);
  run.emit(
    EventType.step_confirmed,
    id,
    {
      decision: d.decision,
      edited: d.arguments !== undefined,
      inDoubt,
      ...(u.unit === "fallback" ? { fallback: true } : {}),
      ...(d.comment ? { comment: d.comment } : {}),
      ...who(d),
    },
    `${r.waitRound ?? 0}`,
  );
  if (d.decision === "mark_done") {
    // the approver states the effect happened: complete without executing again
    const fallback = r.fallbackInDoubt !== undefined;
    run.set(id, { inDoubt: false, fallbackInDoubt: undefined });
    return run.completeStep(c, d.output ?? null, fallback ? { usedFallback: true } : {}, true);
  }
  if (d.decision === "approve") {
    // in doubt, approve = run it again (for a fallback in doubt: the fallback skill)
    // edited arguments were checked against this version's input schema: they are for it
    const edited = d.arguments !== undefined ? { argsVersion: { skill: u.skill.name, ...skillVersion(u.skill) } } : {};
    if (u.unit === "fallback") {
      const approved = d.arguments ?? (r.fallbackInput as Record<string, unknown> | undefined) ?? u.template;
      run.set(id, { fallbackApprovedArguments: approved, inDoubt: false, ...edited });
    } else {
      const approved = d.arguments ?? (r.input as Record<string, unknown> | undefined) ?? c.step.arguments;
      run.set(id, { approvedArguments: approved, inDoubt: false, ...edited });
    }
    run.argCache.delete(`${u.unit}:${id}`);
    run.sched.unpark(id);
    return;
  }
  const error: StepError = {
    code: ErrorCode.REJECTED,
    message: d.comment ? `rejected: ${d.comment}` : "rejected by approver",
  };
  run.set(id, { inDoubt: false, fallbackInDoubt: undefined });
  // a rejected fallback: the step's own failure travels with the rejection
  const original = inFallback(r) ? (r.fallbackOf ?? r.error) : undefined;
  run.finishFailed(c, original ? { ...error, details: { stepError: original } } : error, {}, "parked");
}
