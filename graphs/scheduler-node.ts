/**
 * The scheduler node: drives the pure Scheduler with real work. Each step attempt (and each
 * preview, fallback and consumed decision) is a durable functional-API task pinned to a slot,
 * so a finished step is saved the moment it ends and its successors start at once, without
 * waiting for a superstep boundary (see ARCHITECTURE.md).
 *
 * The node returns when nothing runs and nothing can start: the run is finished, halted, or
 * waits for confirmations (then the approval node interrupts and routes back here).
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { abortableSleep } from "../skills/core/index.js";
import { AsyncQueue } from "../src/kernel/async-queue.js";
import { ErrorCode, ToolchainError, toStepError, type StepError } from "../src/kernel/errors.js";
import { EventType } from "../src/kernel/events.js";
import { fault, FaultPoint } from "../src/kernel/faults.js";
import { assertStepTransition } from "../src/kernel/status.js";
import { executeAttempt, type AttemptResult } from "../src/kernel/execute-attempt.js";
import { unstorableResult } from "../src/kernel/storable.js";
import { Scheduler, type Claims, type RestoredStatus } from "../src/kernel/scheduler.js";
import type { StepStatus } from "../src/kernel/status.js";
import { resolveArguments } from "../src/plan/refs.js";
import { hasSideEffects } from "../src/skills/contract.js";
import { decideRetry } from "../src/plan/retry-policy.js";
import { compilePlanAsync, type CompiledStep } from "../src/plan/validate.js";
import { callDurable } from "./durable-task.js";
import { emitter } from "./emit.js";
import { isGated, limitClaims, runGated } from "./limit-gate.js";
import { compiledFor, type RuntimeEnv } from "./env.js";
import type { Decision, RunState, RunUpdate, StepRecord } from "./state.js";

type Completion =
  | { kind: "attempt"; id: string; attempt: number; res: AttemptResult | InDoubt }
  | { kind: "reconciled"; id: string; attempt: number; res: Reconciled; fallback?: StepError }
  | { kind: "preview"; id: string; res: { ok: true; preview: unknown } | { ok: false; error: StepError } }
  | { kind: "fallback"; id: string; original: StepError; attempt: number; res: AttemptResult | InDoubt }
  | { kind: "retry"; id: string; attempt: number }
  | { kind: "decision"; id: string; decision: Decision }
  /** A decision offered by the runtime while this node runs (arrives outside the node's context). */
  | { kind: "offer"; id: string; decision: Decision }
  /** Wakes the loop after a cancel or the deadline; carries no work. */
  | { kind: "wake" };

/** The attempt was started by a process that died before its result was saved. */
interface InDoubt {
  ok: false;
  inDoubt: true;
  durationMs: 0;
  error: StepError;
}
type Reconciled = { applied: true; output: unknown } | { applied: false } | { unknown: true; error?: StepError };

const RESTORE: Partial<Record<StepStatus, RestoredStatus>> = {
  completed: "completed",
  failed: "failed",
  skipped: "skipped",
  cancelled: "cancelled",
  waiting_confirmation: "parked",
  rolled_back: "completed",
  rollback_failed: "completed",
};

export function makeSchedulerNode(env: RuntimeEnv) {
  return async function scheduler(state: RunState, config: LangGraphRunnableConfig): Promise<RunUpdate> {
    const t0 = env.now();
    const runId = state.runId;
    let compiled: Awaited<ReturnType<typeof compilePlanAsync>>;
    try {
      compiled = await compiledFor(env, runId, state.plan, () => compilePlanAsync(state.plan, { registry: env.registry }));
    } catch (e) {
      // the plan was validated before the run started; one that no longer validates was edited
      // in the checkpoint (Studio's "edit state", updateState): end the run with the code
      // rather than throw and leave the thread stuck at this node
      return { status: "failed", error: toStepError(e), segmentEnded: false, halt: null, updatedAt: new Date(env.now()).toISOString() };
    }
    const { plan } = compiled;
    const emit = emitter(config, env);
    const iso = () => new Date(env.now()).toISOString();

    const touched: Record<string, StepRecord> = {};
    const rec = (id: string): StepRecord => touched[id] ?? state.steps[id] ?? { status: "pending", attempts: 0 };
    const set = (id: string, patch: Partial<StepRecord>) => {
      if (patch.status) assertStepTransition(id, rec(id).status, patch.status);
      return (touched[id] = { ...rec(id), ...patch });
    };
    const outputs: Record<string, unknown> = {};
    for (const [id, r] of Object.entries(state.steps)) if (r.status === "completed" || r.status === "rolled_back" || r.status === "rollback_failed") outputs[id] = r.output;
    const memory: Record<string, unknown> = { ...state.memory };
    const memoryUpdate: Record<string, unknown> = {};
    const completionOrder: string[] = [];

    const restored = new Map<string, RestoredStatus>();
    for (const [id, r] of Object.entries(state.steps)) {
      const st = RESTORE[r.status];
      if (st) restored.set(id, st);
    }
    const sched = Scheduler.restore(
      compiled.steps.map((c) => ({ id: c.id, deps: c.deps, successors: c.successors, priority: c.priority, onFailure: c.onFailure })),
      { maxConcurrency: plan.maxConcurrency },
      restored,
      compiled.topo,
    );

    let halt: RunState["halt"] = null;
    let runError = state.error;
    const haltCtl = new AbortController();
    const stepCtls = new Map<string, AbortController>();
    const queue = new AsyncQueue<Completion>();
    let inflight = 0;
    let launched = 0; // durable tasks started by this execution of the node (see env.segmentTasks)
    let draining = false;
    const track = <T>(p: Promise<T>, done: (v: T) => Completion, failed: (e: unknown) => Completion) => {
      inflight++;
      p.then((v) => queue.push(done(v)), (e) => queue.push(failed(e)));
    };

    function haltRun(kind: "fail_fast" | "deadline" | "cancelled", error: StepError): void {
      if (halt) return;
      halt = kind;
      runError = error;
      haltCtl.abort();
      for (const id of sched.halt()) {
        set(id, { status: "cancelled", finishedAt: iso(), error: { code: error.code === ErrorCode.DEADLINE_EXCEEDED ? error.code : ErrorCode.CANCELLED, message: `not run: ${error.message}` } });
        emit(EventType.step_cancelled, id, { reason: kind });
      }
      const reason = new ToolchainError(kind === "deadline" ? ErrorCode.DEADLINE_EXCEEDED : ErrorCode.CANCELLED, kind === "fail_fast" ? "cancelled by fail_fast" : error.message);
      for (const c of stepCtls.values()) c.abort(reason);
    }

    // arguments are resolved once per step when it is about to start (its inputs are final then)
    const argCache = new Map<string, { args: Record<string, unknown> } | { error: StepError }>();
    function argsFor(c: CompiledStep) {
      let r = argCache.get(c.id);
      if (!r) {
        try {
          const base = rec(c.id).approvedArguments ?? c.step.arguments;
          r = { args: resolveArguments(base, { context: state.context, memory, steps: outputs }) };
        } catch (e) {
          r = { error: { ...toStepError(e), effectStarted: false } };
        }
        argCache.set(c.id, r);
      }
      return r;
    }
    function claimsOf(id: string): Claims {
      const c = compiled.byId.get(id)!;
      const r = argsFor(c);
      const keys: string[] = [];
      if (c.skill.parallelSafe === false) keys.push(`skill:${c.skill.name}`);
      if ("args" in r && c.skill.serialKey) {
        const parsed = c.skill.input.safeParse(r.args);
        const k = parsed.success ? c.skill.serialKey(parsed.data) : undefined;
        if (k !== undefined) keys.push(`key:${k}`);
      }
      return { serialKeys: keys, resource: c.skill.resource };
    }

    function needsConfirmation(c: CompiledStep, args: Record<string, unknown>): boolean {
      if (rec(c.id).approvedArguments !== undefined) return false;
      if (c.step.requireConfirmation !== undefined) return c.step.requireConfirmation;
      const rc = c.skill.requiresConfirmation;
      if (typeof rc !== "function") return Boolean(rc);
      const parsed = c.skill.input.safeParse(args);
      return parsed.success ? rc(parsed.data) : false;
    }

    function launch(id: string): void {
      launched++;
      const c = compiled.byId.get(id)!;
      const fbDoubt = rec(id).fallbackInDoubt;
      if (fbDoubt !== undefined) {
        // a human approved retrying a fallback in doubt
        set(id, { status: "running", fallbackInDoubt: undefined });
        return startFallback(c, rec(id).error ?? { code: ErrorCode.EXECUTION_FAILED, message: "step failed" }, fbDoubt + 1);
      }
      const r = argsFor(c);
      if ("error" in r) return finishFailed(c, r.error);
      if (needsConfirmation(c, r.args)) {
        set(id, { status: "running", input: r.args, startedAt: rec(id).startedAt ?? iso() });
        const preview = c.skill.preview;
        const parsed = c.skill.input.safeParse(r.args);
        if (!parsed.success) {
          return finishFailed(c, { code: ErrorCode.INVALID_INPUT, message: `input does not match ${c.skill.name}: ${parsed.error.issues.map((i) => i.message).join("; ")}`, effectStarted: false });
        }
        track(
          callDurable(config, { kind: "preview", stepId: id, stepIndex: c.index }, async () => {
            try {
              const p = preview
                ? await preview(parsed.data, { runId, stepId: id, idempotencyKey: `${runId}:${id}`, signal: haltCtl.signal, logger: env.logger(runId, id), context: state.context, workspaceId: state.workspaceId ?? "default" })
                : null;
              const bad = unstorableResult(p, "preview", c.skill.name); // a preview is stored with the run
              return bad ? { ok: false as const, error: { ...bad, effectStarted: false } } : { ok: true as const, preview: p ?? null };
            } catch (e) {
              return { ok: false as const, error: toStepError(e) };
            }
          }),
          (res) => ({ kind: "preview", id, res }),
          (e) => ({ kind: "preview", id, res: { ok: false, error: toStepError(e) } }),
        );
        return;
      }
      startAttempt(c, rec(id).attempts + 1, r.args);
    }

    function startAttempt(c: CompiledStep, attempt: number, args: Record<string, unknown>): void {
      const ctl = new AbortController();
      stepCtls.set(c.id, ctl);
      set(c.id, { status: "running", attempts: attempt, input: args, startedAt: rec(c.id).startedAt ?? iso(), inDoubt: false });
      // limits across runs (graphs/limit-gate.ts): a gated attempt reports step_started once it holds them
      const claims = limitClaims(c.skill, args);
      const gated = isGated(env, claims);
      const started = () => emit(EventType.step_started, c.id, { attempt, skillName: c.skill.name }, `${attempt}`);
      if (!gated) started();
      const run = () =>
        executeAttempt({
          skill: c.skill,
          args,
          runId,
          stepId: c.id,
          attempt,
          idempotencyKey: `${runId}:${c.id}`,
          context: state.context,
          workspaceId: state.workspaceId,
          logger: env.logger(runId, c.id),
          signal: ctl.signal,
          timeoutMs: c.step.timeoutMs,
        });
      const unsafe = hasSideEffects(c.skill) && !c.skill.idempotent;
      // Runs only when no result of this attempt was saved. For a non-idempotent effect, claim a
      // durable intent first: if a dead process claimed it before, the attempt is in doubt and is
      // not executed again (reconcile or a human decides).
      const attemptTask = () =>
        callDurable(config, { kind: "step", stepId: c.id, stepIndex: c.index, attempt }, async (): Promise<AttemptResult | InDoubt> => {
          const body = async (): Promise<AttemptResult | InDoubt> => {
            if (unsafe) {
              if (!(await env.intents.claimIntent(runId, c.id, attempt))) {
                return { ok: false, inDoubt: true, durationMs: 0, error: { code: ErrorCode.EXECUTION_FAILED, message: `attempt ${attempt} was interrupted by a process failure; its effect may or may not have happened` } };
              }
              fault(FaultPoint.intent_claimed);
            }
            const res = await run();
            fault(FaultPoint.effect_returned);
            return res;
          };
          // limits across runs (graphs/limit-gate.ts): held only while the attempt runs
          if (!gated) return body();
          return runGated(env, emit, { runId, stepId: c.id, attempt }, claims, ctl.signal, started, body, (error) => ({ ok: false, durationMs: 0, error }));
        });
      track(
        attemptTask(),
        (res) => ({ kind: "attempt", id: c.id, attempt, res }),
        (e) => ({ kind: "attempt", id: c.id, attempt, res: { ok: false, durationMs: 0, error: toStepError(e) } }),
      );
    }

    /**
     * An attempt in doubt (of the step's skill, or of its fallback skill when `fallback` is the
     * original failure): ask the skill (durably, one task per attempt); if it cannot tell, a
     * human decides.
     */
    function reconcile(c: CompiledStep, attempt: number, fallback?: { error: StepError; input: unknown }): void {
      const skill = fallback ? env.registry.get((c.step.fallback as { skillName: string }).skillName)! : c.skill;
      const rc = skill.reconcile;
      track(
        callDurable(config, { kind: fallback ? "reconcile_fallback" : "reconcile", stepId: c.id, stepIndex: c.index, attempt }, async (): Promise<Reconciled> => {
          if (!rc) return { unknown: true };
          try {
            const idempotencyKey = fallback ? `${runId}:${c.id}:fallback` : `${runId}:${c.id}`;
            const r = await rc({ runId, stepId: c.id, idempotencyKey, input: fallback ? fallback.input : rec(c.id).input, signal: haltCtl.signal, logger: env.logger(runId, c.id) });
            const bad = r && "applied" in r && r.applied ? unstorableResult(r.output, "output", skill.name) : undefined;
            return bad ? { unknown: true, error: bad } : r ?? { unknown: true };
          } catch (e) {
            return { unknown: true, error: toStepError(e) };
          }
        }),
        (res) => ({ kind: "reconciled", id: c.id, attempt, res, fallback: fallback?.error }),
        (e) => ({ kind: "reconciled", id: c.id, attempt, res: { unknown: true, error: toStepError(e) }, fallback: fallback?.error }),
      );
    }

    function completeStep(c: CompiledStep, output: unknown, extra: Partial<StepRecord> = {}): void {
      set(c.id, { status: "completed", output, finishedAt: iso(), ...extra });
      outputs[c.id] = output;
      if (c.step.saveResultAs) memory[c.step.saveResultAs] = memoryUpdate[c.step.saveResultAs] = output;
      completionOrder.push(c.id);
      emit(EventType.step_completed, c.id, { attempts: rec(c.id).attempts, usedFallback: extra.usedFallback ?? false });
      sched.complete(c.id);
    }

    function finishFailed(c: CompiledStep, error: StepError, extra: Partial<StepRecord> = {}): void {
      set(c.id, { status: "failed", error, finishedAt: iso(), ...extra });
      emit(EventType.step_failed, c.id, { error, attempts: rec(c.id).attempts, ...(extra.retrySuppressed ? { retrySuppressed: extra.retrySuppressed } : {}) });
      const r = sched.fail(c.id);
      for (const s of r.skipped) {
        set(s, { status: "skipped", finishedAt: iso(), error: { code: error.code, message: `skipped: dependency "${c.id}" failed` } });
        emit(EventType.step_skipped, s, { because: c.id });
      }
      if (r.halted) haltRun("fail_fast", error);
    }

    function failOrFallback(c: CompiledStep, error: StepError, retrySuppressed?: string): void {
      const extra: Partial<StepRecord> = retrySuppressed ? { retrySuppressed } : {};
      const fb = c.step.fallback;
      if (!fb || halt) return finishFailed(c, error, extra);
      if ("value" in fb) return completeStep(c, fb.value ?? null, { usedFallback: true, error, ...extra });
      startFallback(c, error, 1);
    }

    /**
     * The fallback skill, attempt n (n > 1 only after a human approved retrying a fallback in
     * doubt). A non-idempotent fallback claims a durable intent first, exactly like a step attempt.
     */
    function startFallback(c: CompiledStep, original: StepError, attempt: number): void {
      const fb = c.step.fallback as { skillName: string; arguments?: Record<string, unknown> };
      const skill = env.registry.get(fb.skillName)!;
      let args: Record<string, unknown>;
      try {
        args = resolveArguments(fb.arguments ?? {}, { context: state.context, memory, steps: outputs }, "fallback.arguments");
      } catch (e) {
        return finishFailed(c, { ...original, details: { fallbackError: toStepError(e) } });
      }
      const ctl = new AbortController();
      stepCtls.set(c.id, ctl);
      set(c.id, { fallbackAttempts: attempt, fallbackInput: args });
      const unsafe = hasSideEffects(skill) && !skill.idempotent;
      track(
        callDurable(config, { kind: "fallback", stepId: c.id, stepIndex: c.index, attempt }, async (): Promise<AttemptResult | InDoubt> => {
          if (unsafe) {
            if (!(await env.intents.claimIntent(runId, `${c.id}#fallback`, attempt))) {
              return { ok: false, inDoubt: true, durationMs: 0, error: { code: ErrorCode.EXECUTION_FAILED, message: `fallback attempt ${attempt} was interrupted by a process failure; its effect may or may not have happened` } };
            }
            fault(FaultPoint.intent_claimed);
          }
          const res = await executeAttempt({ skill, args, runId, stepId: c.id, attempt, idempotencyKey: `${runId}:${c.id}:fallback`, context: state.context, workspaceId: state.workspaceId, logger: env.logger(runId, c.id), signal: ctl.signal, timeoutMs: c.step.timeoutMs });
          fault(FaultPoint.effect_returned);
          return res;
        }),
        (res) => ({ kind: "fallback", id: c.id, original, attempt, res }),
        (e) => ({ kind: "fallback", id: c.id, original, attempt, res: { ok: false, durationMs: 0, error: toStepError(e) } }),
      );
    }

    /** Nobody can tell whether an attempt's effect happened: the step waits for a human (retry / mark_done / reject). */
    function waitInDoubt(c: CompiledStep, round: number, preview: Record<string, unknown>, extra: Partial<StepRecord> = {}): void {
      set(c.id, { status: "waiting_confirmation", inDoubt: true, waitRound: round, preview, ...extra });
      sched.park(c.id);
      emit(EventType.step_waiting_confirmation, c.id, { skillName: c.skill.name, arguments: rec(c.id).input, preview, round, inDoubt: true }, `${round}`);
      const early = pendingDecisions.get(c.id);
      if (early && answers(c.id, early)) {
        pendingDecisions.delete(c.id);
        consumeDecision(c, early);
      }
    }

    /**
     * A decision applies to the wait it answers (step and round) and to nothing else: an old
     * decision of this step (an earlier round, still in state) never answers a later wait.
     */
    function answers(id: string, d: Decision): boolean {
      return rec(id).status === "waiting_confirmation" && d.round === (rec(id).waitRound ?? 0);
    }

    function applyDecision(id: string, d: Decision): void {
      const c = compiled.byId.get(id);
      if (!c || !answers(id, d) || halt) return;
      const inDoubt = rec(id).inDoubt === true;
      const fallbackInDoubt = rec(id).fallbackInDoubt;
      emit(EventType.step_confirmed, id, { decision: d.decision, edited: d.arguments !== undefined, inDoubt, ...(d.comment ? { comment: d.comment } : {}) }, `${rec(id).waitRound ?? 0}`);
      if (d.decision === "mark_done") {
        // the approver states the effect happened: complete without executing again
        set(id, { inDoubt: false, fallbackInDoubt: undefined });
        completionOrder.push(id);
        const output = d.output ?? null;
        set(id, { status: "completed", output, finishedAt: iso(), ...(fallbackInDoubt !== undefined ? { usedFallback: true } : {}) });
        outputs[id] = output;
        if (c.step.saveResultAs) memory[c.step.saveResultAs] = memoryUpdate[c.step.saveResultAs] = output;
        emit(EventType.step_completed, id, { attempts: rec(id).attempts, markedDone: true });
        sched.completeParked(id);
        return;
      }
      if (d.decision === "approve") {
        // (for a fallback in doubt, approve = retry the fallback: launch() sees fallbackInDoubt)
        const approved = d.arguments ?? (rec(id).input as Record<string, unknown> | undefined) ?? c.step.arguments;
        set(id, { approvedArguments: approved, inDoubt: false });
        argCache.delete(id);
        sched.unpark(id);
        return;
      }
      const error: StepError = { code: ErrorCode.REJECTED, message: d.comment ? `rejected: ${d.comment}` : "rejected by approver" };
      set(id, { status: "failed", error, finishedAt: iso(), inDoubt: false, fallbackInDoubt: undefined });
      emit(EventType.step_failed, id, { error, attempts: rec(id).attempts });
      const r = sched.completeParkedAs(id, "failed");
      for (const s of r.skipped) {
        set(s, { status: "skipped", finishedAt: iso(), error: { code: ErrorCode.REJECTED, message: `skipped: dependency "${id}" was rejected` } });
        emit(EventType.step_skipped, s, { because: id });
      }
      if (r.halted) haltRun("fail_fast", error);
    }

    function handle(item: Completion): void {
      if (item.kind === "wake") return;
      if (item.kind !== "offer" && item.kind !== "retry") fault(FaultPoint.task_returned);
      if (item.kind === "offer") return offered(item.id, item.decision);
      const c = compiled.byId.get(item.id)!;
      switch (item.kind) {
        case "decision":
          inflight--;
          return applyDecision(item.id, item.decision);
        case "preview": {
          inflight--;
          if (!item.res.ok) return finishFailed(c, item.res.error);
          if (halt) {
            sched.cancelRunning(c.id);
            set(c.id, { status: "cancelled", finishedAt: iso() });
            return;
          }
          set(c.id, { status: "waiting_confirmation", preview: item.res.preview, waitRound: 0 });
          sched.park(c.id);
          emit(EventType.step_waiting_confirmation, c.id, { skillName: c.skill.name, arguments: rec(c.id).input, preview: item.res.preview, round: 0 }, "0");
          const early = pendingDecisions.get(c.id);
          if (early && answers(c.id, early)) {
            pendingDecisions.delete(c.id);
            consumeDecision(c, early);
          }
          return;
        }
        case "retry": {
          inflight--;
          if (halt) return cancelRunning(c, runError);
          if (draining) return; // the next segment starts the attempt (the step stays "retrying")
          const r = argsFor(c);
          if ("error" in r) return finishFailed(c, r.error);
          return startAttempt(c, item.attempt, r.args);
        }
        case "fallback": {
          inflight--;
          stepCtls.delete(c.id);
          const res = item.res;
          if ("inDoubt" in res) return reconcile(c, item.attempt, { error: item.original, input: rec(c.id).fallbackInput });
          if (res.ok) return completeStep(c, res.output, { usedFallback: true, error: item.original });
          return finishFailed(c, { ...item.original, details: { fallbackError: res.error } });
        }
        case "reconciled": {
          inflight--;
          const r = item.res;
          const fb = item.fallback;
          if ("applied" in r && r.applied) return completeStep(c, r.output ?? null, { inDoubt: false, ...(fb ? { usedFallback: true, error: fb } : {}) });
          if ("applied" in r && !r.applied && !halt) {
            if (fb) return startFallback(c, fb, item.attempt + 1);
            const a = argsFor(c);
            if ("args" in a) return startAttempt(c, item.attempt + 1, a.args);
          }
          // Rounds are unique per step: n after step attempt n; attempts + k after fallback attempt k
          // (no step attempt follows a fallback).
          const round = fb ? rec(c.id).attempts + item.attempt : item.attempt;
          const preview = {
            inDoubt: true,
            attempt: item.attempt,
            ...(fb ? { fallback: (c.step.fallback as { skillName: string }).skillName } : {}),
            reason: `the process running this ${fb ? "step's fallback" : "step"} stopped before its result was saved`,
            ...("error" in r && r.error ? { reconcileError: r.error } : {}),
          };
          return waitInDoubt(c, round, preview, fb ? { fallbackInDoubt: item.attempt, error: fb } : {});
        }
        case "attempt": {
          inflight--;
          stepCtls.delete(c.id);
          const res = item.res;
          if ("inDoubt" in res) return reconcile(c, item.attempt);
          if (res.ok) {
            env.registry.observeDuration(c.skill.name, res.durationMs);
            return completeStep(c, res.output);
          }
          if (halt && (res.error.code === ErrorCode.CANCELLED || res.error.code === ErrorCode.DEADLINE_EXCEEDED)) return cancelRunning(c, res.error);
          const d = decideRetry(c.retry, c.skill, res.error, item.attempt, env.random);
          if (d.retry && !halt) {
            set(c.id, { status: "retrying", error: res.error });
            emit(EventType.step_retrying, c.id, { attempt: item.attempt, nextAttempt: item.attempt + 1, delayMs: d.delayMs, error: res.error }, `${item.attempt}`);
            track(
              abortableSleep(d.delayMs, haltCtl.signal).catch(() => undefined),
              () => ({ kind: "retry", id: c.id, attempt: item.attempt + 1 }),
              () => ({ kind: "retry", id: c.id, attempt: item.attempt + 1 }),
            );
            return;
          }
          const suppressed = !d.retry && d.reason === "unsafe_side_effect" ? "non_idempotent_side_effect" : undefined;
          return failOrFallback(c, res.error, suppressed);
        }
      }
    }

    function cancelRunning(c: CompiledStep, error: StepError | null): void {
      sched.cancelRunning(c.id);
      set(c.id, { status: "cancelled", finishedAt: iso(), ...(error ? { error } : {}) });
      emit(EventType.step_cancelled, c.id, { reason: halt ?? "cancelled" });
    }

    // Decisions that arrive while this node runs: record each durably, then apply it.
    const pendingDecisions = new Map<string, Decision>();
    function consumeDecision(c: CompiledStep, d: Decision): void {
      track(
        callDurable(config, { kind: "decision", stepId: c.id, stepIndex: c.index, round: d.round ?? 0 }, async () => d),
        (rd) => ({ kind: "decision", id: c.id, decision: rd }),
        () => ({ kind: "decision", id: c.id, decision: d }),
      );
    }
    const offered = (stepId: string, d: Decision) => {
      const c = compiled.byId.get(stepId);
      if (!c) return;
      if (answers(stepId, d)) consumeDecision(c, d);
      else if (rec(stepId).status !== "waiting_confirmation") pendingDecisions.set(stepId, d); // it will wait soon
      // else: a decision for another round of this step (stale): ignored
    };

    // -- run --
    const runSignal = env.controls.signal(runId);
    const onCancel = () => {
      haltRun("cancelled", toStepError(runSignal.reason ?? new ToolchainError(ErrorCode.CANCELLED, "run cancelled")));
      queue.push({ kind: "wake" });
    };
    // the durable record must be written from the node's own async context: go through the queue
    const stopListening = env.controls.listen(runId, (id, decision) => queue.push({ kind: "offer", id, decision }));
    runSignal.addEventListener("abort", onCancel, { once: true });
    // The drive stopped under this node (its lease was lost to another process, or it is shutting
    // down): stop executing at once. Running skills are aborted and nothing new starts; nothing is
    // recorded (the new owner continues from the checkpoint, an interrupted effect is in doubt there).
    const driveSignal = config.signal;
    const onDriveStop = () => {
      for (const ctl of stepCtls.values()) ctl.abort(driveSignal!.reason);
      haltCtl.abort();
      queue.push({ kind: "wake" });
    };
    driveSignal?.addEventListener("abort", onDriveStop, { once: true });
    let deadlineTimer: NodeJS.Timeout | undefined;
    try {
      if (state.halt) haltRun(state.halt, state.error ?? { code: ErrorCode.CANCELLED, message: "run cancelled" });
      if (runSignal.aborted) onCancel();
      if (plan.deadlineMs !== undefined && !halt) {
        const left = plan.deadlineMs - state.elapsedMs;
        const onDeadline = () => {
          haltRun("deadline", { code: ErrorCode.DEADLINE_EXCEEDED, message: `plan deadline of ${plan.deadlineMs} ms exceeded` });
          queue.push({ kind: "wake" });
        };
        if (left <= 0) onDeadline();
        else deadlineTimer = setTimeout(onDeadline, left);
      }
      for (const [id, d] of Object.entries(state.decisions)) if (d && answers(id, d)) applyDecision(id, d);
      for (const [id, d] of env.controls.take(runId)) offered(id, d);

      if (driveSignal?.aborted) onDriveStop();
      for (;;) {
        if (driveSignal?.aborted) throw driveSignal.reason ?? new ToolchainError(ErrorCode.RUN_NOT_ACTIVE, "the drive stopped");
        if (!halt && !draining) for (const id of sched.start(claimsOf, env.segmentTasks - launched)) launch(id);
        if (launched >= env.segmentTasks) draining = true;
        if (inflight <= 0) break;
        handle(await queue.shift());
      }
    } finally {
      clearTimeout(deadlineTimer);
      stopListening();
      // offers that raced with the exit go back to the inbox: the approval node takes them
      for (const item of queue.drain()) if (item.kind === "offer") env.controls.offer(runId, item.id, item.decision);
      runSignal.removeEventListener("abort", onCancel);
      driveSignal?.removeEventListener("abort", onDriveStop);
    }

    const waiting = sched.idsIn("parked").length > 0 && !halt;
    // drained before the end: a fresh execution of this node continues (see env.segmentTasks)
    const more = draining && !halt && (sched.idsIn("ready").length > 0 || sched.idsIn("running").length > 0);
    return {
      segmentEnded: more,
      steps: touched,
      memory: memoryUpdate,
      completionOrder,
      status: waiting ? "waiting_confirmation" : "running",
      error: runError,
      halt,
      elapsedMs: state.elapsedMs + (env.now() - t0),
      updatedAt: iso(),
    };
  };
}
