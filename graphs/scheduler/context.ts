/**
 * One execution of the scheduler node: what it knows (the state it started from, the records it
 * changed), the pure Scheduler, the queue of completions with its in-flight count, and the abort
 * sources in one named record. The concerns (attempts, outcomes, decisions, reconcile) are
 * functions over this context in their own files.
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { AsyncQueue } from "../../src/kernel/async-queue.js";
import type { AttemptResult } from "../../src/kernel/execute-attempt.js";
import { ErrorCode, ToolchainError, type StepError } from "../../src/kernel/errors.js";
import { EventType } from "../../src/kernel/events.js";
import type { Unit } from "../../src/kernel/after-attempt.js";
import { Scheduler, type RestoredStatus } from "../../src/kernel/scheduler.js";
import { assertStepTransition, type StepStatus } from "../../src/kernel/status.js";
import type { CompiledPlan, CompiledStep } from "../../src/plan/validate.js";
import type { Emit } from "../emit.js";
import type { RuntimeEnv } from "../env.js";
import type { Decision, RunState, StepRecord } from "../state.js";
import { isoAt } from "../../src/kernel/iso-time.js";

/** The attempt was started by a process that died before its result was saved. */
export interface InDoubt {
  ok: false;
  inDoubt: true;
  durationMs: 0;
  error: StepError;
}
export type Reconciled = { applied: true; output: unknown } | { applied: false } | { unknown: true; error?: StepError };
export type PreviewResult = { ok: true; preview: unknown } | { ok: false; error: StepError };

/** What the loop waits for. Every kind but `offer` and `wake` is tracked work (counted in flight). */
export type Completion =
  | { kind: "attempt"; id: string; unit: Unit; attempt: number; res: AttemptResult | InDoubt }
  | { kind: "reconciled"; id: string; unit: Unit; attempt: number; res: Reconciled }
  | { kind: "preview"; id: string; unit: Unit; res: PreviewResult }
  | { kind: "retry"; id: string; attempt: number }
  | { kind: "decision"; id: string; decision: Decision }
  /** A decision offered by the runtime while this node runs (arrives outside the node's context). */
  | { kind: "offer"; id: string; decision: Decision }
  /** Wakes the loop after a cancel or the deadline; carries no work. */
  | { kind: "wake" };
type Tracked = Exclude<Completion, { kind: "offer" } | { kind: "wake" }>;

/** Which signal stops what. */
export interface Aborts {
  /** The run halted (cancel, fail_fast, deadline): previews, reconciles and backoffs stop. */
  readonly halt: AbortController;
  /** One per running attempt: aborted with the halt's reason, or when the drive stops. */
  readonly attempts: Map<string, AbortController>;
  /** A cancel of the run from any process (RunControls). */
  readonly cancel: AbortSignal;
  /** The drive under this node stopped (lease lost, shutdown): stop at once, record nothing. */
  readonly drive: AbortSignal | undefined;
}

const RESTORE: Partial<Record<StepStatus, RestoredStatus>> = {
  completed: "completed",
  failed: "failed",
  skipped: "skipped",
  cancelled: "cancelled",
  waiting_confirmation: "parked",
  rolled_back: "completed",
  rollback_failed: "completed",
};
const HAS_OUTPUT = new Set<StepStatus>(["completed", "rolled_back", "rollback_failed"]);

export class SchedulerRun {
  readonly runId: string;
  readonly plan: CompiledPlan["plan"];
  readonly sched: Scheduler;
  readonly touched: Record<string, StepRecord> = {};
  readonly outputs: Record<string, unknown> = {};
  readonly memory: Record<string, unknown>;
  readonly memoryUpdate: Record<string, unknown> = {};
  readonly completionOrder: string[] = [];
  readonly queue = new AsyncQueue<Completion>();
  readonly aborts: Aborts;
  /** Decisions that arrived before their step waits (it will wait soon). */
  readonly early = new Map<string, Decision>();
  /** Arguments resolved once per unit when it is about to start (its inputs are final then). */
  readonly argCache = new Map<string, { args: Record<string, unknown> } | { error: StepError }>();
  halt: RunState["halt"] = null;
  /**
   * Recovering a run whose cancel was recorded before this drive (index.ts `harvest`): tasks
   * replay their saved results, and nothing that has none executes (it returns `notRun()`).
   */
  harvesting = false;
  runError: StepError | null;
  /** Durable tasks started by this execution of the node (see env.segmentTasks). */
  launched = 0;
  draining = false;
  private inflight = 0;

  constructor(
    readonly env: RuntimeEnv,
    readonly config: LangGraphRunnableConfig,
    readonly state: RunState,
    readonly compiled: CompiledPlan,
    readonly emit: Emit,
  ) {
    this.runId = state.runId;
    this.plan = compiled.plan;
    this.runError = state.error;
    this.memory = { ...state.memory };
    const restored = new Map<string, RestoredStatus>();
    for (const [id, r] of Object.entries(state.steps)) {
      if (HAS_OUTPUT.has(r.status)) this.outputs[id] = r.output;
      const st = RESTORE[r.status];
      if (st) restored.set(id, st);
    }
    this.sched = Scheduler.restore(
      compiled.steps.map((c) => ({
        id: c.id,
        deps: c.deps,
        successors: c.successors,
        priority: c.priority,
        onFailure: c.onFailure,
      })),
      { maxConcurrency: this.plan.maxConcurrency },
      restored,
      compiled.topo,
    );
    this.aborts = {
      halt: new AbortController(),
      attempts: new Map(),
      cancel: env.controls.signal(state.runId),
      drive: config.signal,
    };
  }

  iso(): string {
    return isoAt(this.env.now());
  }
  step(id: string): CompiledStep {
    return this.compiled.byId.get(id)!;
  }
  rec(id: string): StepRecord {
    return this.touched[id] ?? this.state.steps[id] ?? { status: "pending", attempts: 0 };
  }
  set(id: string, patch: Partial<StepRecord>): StepRecord {
    if (patch.status) assertStepTransition(id, this.rec(id).status, patch.status);
    return (this.touched[id] = { ...this.rec(id), ...patch });
  }

  /** Work whose completion the loop waits for; counted until the loop takes its completion. */
  track<T>(p: Promise<T>, done: (v: T) => Tracked, failed: (e: unknown) => Tracked): void {
    this.inflight++;
    p.then(
      (v) => this.queue.push(done(v)),
      (e) => this.queue.push(failed(e)),
    );
  }
  get busy(): boolean {
    return this.inflight > 0;
  }
  /** The next completion; a tracked one leaves the in-flight count here, in one place. */
  async next(): Promise<Completion> {
    const item = await this.queue.shift();
    if (item.kind !== "offer" && item.kind !== "wake") this.inflight--;
    return item;
  }

  /** `markedDone`: a person stated that the effect of a step in doubt happened (it was parked). */
  completeStep(c: CompiledStep, output: unknown, extra: Partial<StepRecord> = {}, markedDone = false): void {
    this.set(c.id, { status: "completed", output, finishedAt: this.iso(), ...extra });
    this.outputs[c.id] = output;
    if (c.step.saveResultAs) this.memory[c.step.saveResultAs] = this.memoryUpdate[c.step.saveResultAs] = output;
    this.completionOrder.push(c.id);
    const attempts = this.rec(c.id).attempts;
    this.emit(
      EventType.step_completed,
      c.id,
      markedDone ? { attempts, markedDone: true } : { attempts, usedFallback: extra.usedFallback ?? false },
    );
    if (markedDone) this.sched.completeParked(c.id);
    else this.sched.complete(c.id);
  }

  finishFailed(
    c: CompiledStep,
    error: StepError,
    extra: Partial<StepRecord> = {},
    how: "fail" | "parked" = "fail",
  ): void {
    this.set(c.id, { status: "failed", error, finishedAt: this.iso(), ...extra });
    this.emit(EventType.step_failed, c.id, {
      error,
      attempts: this.rec(c.id).attempts,
      ...(extra.retrySuppressed ? { retrySuppressed: extra.retrySuppressed } : {}),
    });
    const r = how === "parked" ? this.sched.completeParkedAs(c.id, "failed") : this.sched.fail(c.id);
    for (const s of r.skipped) {
      this.set(s, {
        status: "skipped",
        finishedAt: this.iso(),
        error: {
          code: error.code,
          message: `skipped: dependency "${c.id}" ${error.code === ErrorCode.REJECTED ? "was rejected" : "failed"}`,
        },
      });
      this.emit(EventType.step_skipped, s, { because: c.id });
    }
    if (r.halted) this.haltRun("fail_fast", error);
  }

  cancelRunning(c: CompiledStep, error: StepError | null): void {
    this.sched.cancelRunning(c.id);
    this.set(c.id, { status: "cancelled", finishedAt: this.iso(), ...(error ? { error } : {}) });
    this.emit(EventType.step_cancelled, c.id, { reason: this.halt ?? "cancelled" });
  }

  haltRun(kind: "fail_fast" | "deadline" | "cancelled", error: StepError): void {
    if (this.halt) return;
    this.halt = kind;
    this.runError = error;
    this.aborts.halt.abort();
    for (const id of this.sched.halt()) {
      const r = this.rec(id);
      if (r.status === "waiting_confirmation" && r.inDoubt) {
        // its wait asked whether an effect happened: the halt ends the wait, not the doubt
        const fallback = r.fallbackInDoubt !== undefined;
        const e = effectUnknown(
          fallback ? "fallback" : "step",
          fallback ? r.fallbackInDoubt! : (r.waitRound ?? r.attempts),
        );
        this.set(id, {
          status: "failed",
          error: e,
          inDoubt: false,
          fallbackInDoubt: undefined,
          finishedAt: this.iso(),
        });
        this.emit(EventType.step_failed, id, { error: e, attempts: r.attempts });
        continue;
      }
      this.set(id, {
        status: "cancelled",
        finishedAt: this.iso(),
        error: {
          code: error.code === ErrorCode.DEADLINE_EXCEEDED ? error.code : ErrorCode.CANCELLED,
          message: `not run: ${error.message}`,
        },
      });
      this.emit(EventType.step_cancelled, id, { reason: kind });
    }
    const reason = new ToolchainError(
      kind === "deadline" ? ErrorCode.DEADLINE_EXCEEDED : ErrorCode.CANCELLED,
      kind === "fail_fast" ? "cancelled by fail_fast" : error.message,
    );
    for (const c of this.aborts.attempts.values()) c.abort(reason);
  }
}

/** What an attempt or preview task returns instead of running while a cancelled run is harvested. */
export function notRun(): {
  ok: false;
  durationMs: number;
  error: { code: "CANCELLED"; message: string; effectStarted: false; details: { notRun: true } };
} {
  return {
    ok: false,
    durationMs: 0,
    error: {
      code: "CANCELLED",
      message: "not run: the run was cancelled",
      effectStarted: false,
      details: { notRun: true },
    },
  };
}

/** A completion that is `notRun()` (also when replayed from a saved task result). */
export function isNotRun(item: Completion): boolean {
  if (item.kind !== "attempt" && item.kind !== "preview") return false;
  const e = (item.res as { ok: boolean; error?: { details?: unknown } }).error;
  return !item.res.ok && (e?.details as { notRun?: unknown } | undefined)?.notRun === true;
}

/**
 * A step in doubt under a halt whose effect nobody can settle: nothing may run it again and no
 * one is asked any more, so it fails with the doubt stated (never "not run", never compensated).
 */
export function effectUnknown(unit: Unit, attempt: number, details: Record<string, unknown> = {}): StepError {
  const what = unit === "fallback" ? `fallback attempt ${attempt}` : `attempt ${attempt}`;
  return {
    code: ErrorCode.EFFECT_UNKNOWN,
    message: `${what} was interrupted by a process failure and the run halted; its effect may or may not have happened and its skill cannot tell: not run again, not compensated, check it by hand`,
    effectStarted: true,
    details: { inDoubt: true, attempt, ...details },
  };
}
