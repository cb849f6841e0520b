/**
 * Saga compensation: completed steps are undone in reverse completion order, so a step is undone
 * only after every step that depended on it and completed later. Each compensation attempt is a
 * durable pinned task: a crash mid-rollback replays finished compensations from the checkpoint
 * instead of running them again.
 * - best_effort: every compensation is attempted (retried per the step's policy); failures are
 *   recorded and the walk goes on.
 * - strict: one at a time; the first compensation that fails for good stops the walk, the rest
 *   stay untouched (`pending`), the run is `rollback_failed` and an operator decides (retry /
 *   skip / stop) through the confirmation mechanism (the rollback_approval node).
 * A side-effecting step without compensation is `not_compensable`, never counted as rolled back.
 * Every compensation attempt runs under a timeout (the step's `timeoutMs`, else
 * env.compensationTimeoutMs) and the run's cancel signal: a hung compensation is abandoned like a
 * hung step (it cannot hold the run's lease forever), and a cancel that arrives during a rollback
 * started by fail_fast or the deadline aborts the compensation in flight and stops the walk (the
 * rest stay `pending`, the run ends `rollback_failed`, no operator wait: the caller said stop).
 */
import { DEFAULT_WORKSPACE } from "../src/kernel/workspace.js";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { abortableSleep } from "../src/kernel/sleep.js";
import { ErrorCode, ToolchainError, toStepError, type StepError } from "../src/kernel/errors.js";
import { EventType } from "../src/kernel/events.js";
import { fault, FaultPoint } from "../src/kernel/faults.js";
import { assertStepTransition } from "../src/kernel/status.js";
import { hasSideEffects, type Skill } from "../src/skills/contract.js";
import { resolveArguments } from "../src/plan/refs.js";
import { decideRetry } from "../src/plan/retry-policy.js";
import { compilePlanAsync, type CompiledStep } from "../src/plan/validate.js";
import { callDurable } from "./durable-task.js";
import { emitter } from "./emit.js";
import { executeSkill } from "./scheduler/execute.js";
import { compiledFor, type RuntimeEnv } from "./env.js";
import type { RunState, RunUpdate, StepRecord } from "./state.js";

type How =
  | { kind: "not_needed" }
  | { kind: "not_compensable"; why: string }
  | { kind: "compensate"; skill: Skill; effect: Effect }
  | { kind: "delete_created"; skill: Skill; effect: Effect }
  | { kind: "rollback_skill"; skill: Skill; arguments: Record<string, unknown>; effect: Effect };

/** The execution being undone: what ran it, with which input, what it returned, under which key. */
interface Effect {
  skill: Skill;
  input: unknown;
  output: unknown;
  /** `step` (the step's skill) or `fallback` (its fallback skill) */
  unit: "step" | "fallback";
}

/**
 * How a completed step is undone: by the skill whose effect it is. A step completed by its
 * fallback skill is undone by that skill's own compensation (the plan's `rollback` describes the
 * step's skill, not the fallback); a fallback value is not an effect and needs no undoing.
 */
export function compensationFor(c: CompiledStep, r: Pick<StepRecord, "usedFallback" | "input" | "output" | "fallbackInput">, env: Pick<RuntimeEnv, "registry">): How {
  if (r.usedFallback) {
    const fb = c.step.fallback;
    if (!fb || "value" in fb) return { kind: "not_needed" };
    const skill = env.registry.get(fb.skillName)!;
    const effect: Effect = { skill, input: r.fallbackInput, output: r.output, unit: "fallback" };
    if (skill.compensate) return { kind: "compensate", skill, effect };
    if (skill.createdRecords) return { kind: "delete_created", skill, effect };
    return hasSideEffects(skill) ? { kind: "not_compensable", why: `its fallback skill ${skill.name} has side effects and no compensation` } : { kind: "not_needed" };
  }
  const effect: Effect = { skill: c.skill, input: r.input, output: r.output, unit: "step" };
  const rb = c.step.rollback;
  const effects = hasSideEffects(c.skill);
  if (rb?.kind === "none") return effects ? { kind: "not_compensable", why: "its rollback is declared none" } : { kind: "not_needed" };
  if (rb?.kind === "skill") return { kind: "rollback_skill", skill: env.registry.get(rb.skillName)!, arguments: rb.arguments ?? {}, effect };
  if (rb?.kind === "delete_created_records") {
    return c.skill.createdRecords ? { kind: "delete_created", skill: c.skill, effect } : { kind: "not_compensable", why: "its skill does not report created records" };
  }
  if (c.skill.compensate) return { kind: "compensate", skill: c.skill, effect };
  if (c.skill.createdRecords) return { kind: "delete_created", skill: c.skill, effect };
  return effects ? { kind: "not_compensable", why: "it has side effects and no compensation" } : { kind: "not_needed" };
}

/** A step still to be undone (or to be retried after an operator said so). */
function needsWork(r: StepRecord): boolean {
  return r.status === "completed" && (r.rollback === undefined || r.rollback === "pending");
}

export function makeCompensationNode(env: RuntimeEnv) {
  return async function compensation(state: RunState, config: LangGraphRunnableConfig): Promise<RunUpdate> {
    const compiled = await compiledFor(env, state.runId, state.plan, () => compilePlanAsync(state.plan, { registry: env.registry }));
    const mode = compiled.plan.rollbackMode;
    const emit = emitter(config, env);
    const runId = state.runId;
    const touched: Record<string, StepRecord> = {};
    const rec = (id: string) => touched[id] ?? state.steps[id]!;
    const set = (id: string, patch: Partial<StepRecord>) => {
      if (patch.status) assertStepTransition(id, rec(id).status, patch.status);
      return (touched[id] = { ...rec(id), ...patch });
    };
    const outputs: Record<string, unknown> = {};
    for (const [id, r] of Object.entries(state.steps)) if (r.status === "completed" || r.status === "rolled_back" || r.status === "rollback_failed") outputs[id] = r.output;

    const order = [...state.completionOrder].reverse().filter((id) => state.steps[id]?.status === "completed" || state.steps[id]?.status === "rollback_failed");
    emit(EventType.rollback_started, undefined, { mode, steps: order.filter((id) => state.steps[id]!.status === "completed") });

    // A cancel reaches compensations, except the cancel that started this rollback (it is the
    // reason the rollback runs; the signal of the drive that applies it is aborted already).
    const stopSignal = state.halt === "cancelled" ? new AbortController().signal : env.controls.signal(runId);
    let cancelled = false;

    // an operator's answer to a blocked strict rollback
    const block = state.rollbackBlocked;
    const decision = block && state.rollbackDecision?.stepId === block.stepId ? state.rollbackDecision.action : undefined;
    let stopped = false;
    if (block && decision) {
      emit(EventType.step_confirmed, block.stepId, { decision: decision === "retry" ? "approve" : decision === "skip" ? "skip" : "reject", kind: "compensation" }, `${block.round}`);
      if (decision === "retry") set(block.stepId, { status: "completed", rollback: "pending" });
      else if (decision === "skip") set(block.stepId, { rollbackError: { ...block.error, message: `${block.error.message} (skipped by operator)` } });
      else stopped = true;
    }

    for (const id of order) {
      const r = rec(id);
      if (!needsWork(r)) continue;
      if (stopped) {
        set(id, { rollback: "pending" });
        continue;
      }
      const c = compiled.byId.get(id)!;
      const how = compensationFor(c, r, env);
      if (how.kind === "not_needed") {
        set(id, { rollback: "not_needed" });
        continue;
      }
      if (how.kind === "not_compensable") {
        const error: StepError = { code: ErrorCode.NOT_COMPENSABLE, message: `step "${id}" (${r.usedFallback ? c.step.fallback && "skillName" in c.step.fallback ? c.step.fallback.skillName : c.skill.name : c.skill.name}) cannot be undone: ${how.why}` };
        set(id, { rollback: "not_compensable", rollbackError: error });
        emit(EventType.step_rollback_failed, id, { error });
        if (mode === "strict") stopped = true; // only reachable with acceptNoCompensation: nothing an operator could retry
        continue;
      }
      const result = await compensateWithRetry(c, r, how);
      set(id, { rollbackAttempts: (r.rollbackAttempts ?? 0) + result.attempts });
      if (!result.ok && result.error.code === ErrorCode.CANCELLED && stopSignal.aborted) {
        // cancelled mid-rollback: this compensation did not finish; leave the rest untouched
        cancelled = stopped = true;
        set(id, { status: "rollback_failed", rollback: "rollback_failed", rollbackError: result.error });
        emit(EventType.step_rollback_failed, id, { error: result.error, attempts: rec(id).rollbackAttempts, cancelled: true }, `${rec(id).rollbackAttempts}`);
        continue;
      }
      if (result.ok) {
        set(id, { status: "rolled_back", rollback: "rolled_back", rollbackError: undefined });
        emit(EventType.step_rolled_back, id, { attempts: rec(id).rollbackAttempts }, `${rec(id).rollbackAttempts}`);
        continue;
      }
      set(id, { status: "rollback_failed", rollback: "rollback_failed", rollbackError: result.error });
      emit(EventType.step_rollback_failed, id, { error: result.error, attempts: rec(id).rollbackAttempts }, `${rec(id).rollbackAttempts}`);
      if (mode === "strict") {
        // stop here; later steps stay untouched until an operator decides
        for (const later of order.slice(order.indexOf(id) + 1)) if (needsWork(rec(later))) set(later, { rollback: "pending" });
        const blocked = { stepId: id, round: 100 + rec(id).rollbackAttempts!, error: result.error };
        emit(EventType.rollback_waiting_decision, id, { round: blocked.round, error: result.error, skillName: c.skill.name }, `${blocked.round}`);
        return { steps: touched, rollbackBlocked: blocked, rollbackDecision: null, status: "rollback_failed", updatedAt: new Date(env.now()).toISOString() };
      }
    }
    const failures = Object.values({ ...state.steps, ...touched }).filter((x) => x.rollback === "rollback_failed" || x.rollback === "not_compensable" || x.rollback === "pending").length;
    emit(EventType.rollback_completed, undefined, { mode, ok: failures === 0, failures, stopped, ...(cancelled ? { cancelled: true } : {}) });
    return { steps: touched, rollbackBlocked: null, rollbackDecision: null, updatedAt: new Date(env.now()).toISOString() };

    async function compensateWithRetry(c: CompiledStep, r: StepRecord, how: Extract<How, { kind: "compensate" | "delete_created" | "rollback_skill" }>) {
      // the round is the number of compensation attempts before this pass (an operator's retry
      // starts a new pass): together with the attempt it names each compensation task uniquely
      const round = r.rollbackAttempts ?? 0;
      for (let attempt = 1; ; attempt++) {
        const res = await callDurable(config, { kind: "compensate", stepId: c.id, stepIndex: c.index, attempt, round }, async () => {
          // LangGraph saves a task's result asynchronously; our own marker is written before the
          // walk moves on, so a crash right after a compensation never runs it a second time
          const doneKey = `${c.id}#compensated`;
          if (await env.intents.hasIntent(runId, doneKey, 0)) return { ok: true as const };
          const timeoutMs = c.step.timeoutMs ?? env.compensationTimeoutMs;
          if (stopSignal.aborted) return { ok: false as const, error: toStepError(stopSignal.reason ?? new ToolchainError(ErrorCode.CANCELLED, "run cancelled")) };
          const timeout = AbortSignal.timeout(timeoutMs);
          const signal = AbortSignal.any([stopSignal, timeout]);
          const logger = env.logger(runId, c.id);
          const e = how.effect;
          const effectKey = e.unit === "fallback" ? `${runId}:${c.id}:fallback` : `${runId}:${c.id}`;
          const cc = { runId, stepId: c.id, workspaceId: state.workspaceId ?? DEFAULT_WORKSPACE, effectKey, idempotencyKey: `${effectKey}:compensate`, signal, logger, input: e.input, output: e.output };
          try {
            if (how.kind === "compensate") await abandonOnAbort(() => how.skill.compensate!(cc), signal, timeout, timeoutMs);
            else if (how.kind === "delete_created") await abandonOnAbort(() => how.skill.createdRecords!.delete(how.skill.createdRecords!.list(e.output, e.input), cc), signal, timeout, timeoutMs);
            else {
              const args = resolveArguments(how.arguments, { context: state.context, memory: state.memory, steps: outputs, self: { input: e.input, output: e.output } }, "rollback.arguments", { stepId: c.id });
              // a rollback skill executes through the one attempt path, like any other skill
              const a = await executeSkill(env, emit, {
                skill: how.skill,
                args,
                runId,
                stepId: c.id,
                attempt: round * 1_000 + attempt,
                intentKey: `${c.id}#rollback`,
                idempotencyKey: cc.idempotencyKey,
                context: state.context,
                workspaceId: state.workspaceId,
                allowed: state.allowedSkills,
                signal: stopSignal,
                timeoutMs,
                started: () => undefined,
                label: `rollback attempt ${attempt}`,
              });
              // in doubt (a dead process claimed this attempt): never repeated blindly, an operator decides
              if (!a.ok) return { ok: false as const, error: a.error, final: "inDoubt" in a };
            }
            fault(FaultPoint.compensation_done);
            await env.intents.claimIntent(runId, doneKey, 0);
            fault(FaultPoint.compensation_marked);
            return { ok: true as const };
          } catch (e) {
            return { ok: false as const, error: toStepError(e) };
          }
        });
        if (res.ok) return { ok: true as const, attempts: attempt };
        if ("final" in res && res.final) return { ok: false as const, error: res.error, attempts: attempt };
        if (stopSignal.aborted) return { ok: false as const, error: res.error.code === ErrorCode.CANCELLED ? res.error : toStepError(stopSignal.reason), attempts: attempt };
        // compensations are retried per the step's policy (they must be idempotent: same key every time)
        const d = decideRetry(c.retry, { sideEffects: "none", idempotent: true }, res.error, attempt, env.random);
        if (!d.retry) return { ok: false as const, error: res.error, attempts: attempt };
        await abortableSleep(d.delayMs, stopSignal).catch(() => undefined);
      }
    }
  };
}

/**
 * Await a compensation, but stop waiting when its signal aborts (cancel or timeout): a
 * compensation that ignores its signal is abandoned, not awaited, exactly like a step attempt.
 */
async function abandonOnAbort(fn: () => Promise<unknown>, signal: AbortSignal, timeout: AbortSignal, timeoutMs: number): Promise<void> {
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(timeout.aborted ? new ToolchainError(ErrorCode.TIMEOUT, `compensation timed out after ${timeoutMs} ms`) : signal.reason ?? new ToolchainError(ErrorCode.CANCELLED, "compensation aborted"));
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  aborted.catch(() => undefined);
  try {
    await Promise.race([fn(), aborted]);
  } catch (e) {
    if (signal.aborted) throw timeout.aborted ? new ToolchainError(ErrorCode.TIMEOUT, `compensation timed out after ${timeoutMs} ms`) : signal.reason ?? e;
    throw e;
  } finally {
    signal.removeEventListener("abort", onAbort!);
  }
}
