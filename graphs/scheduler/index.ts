/**
 * The scheduler node: drives the pure Scheduler with real work. Each step attempt (and each
 * preview, reconcile and consumed decision) is a durable functional-API task pinned to a slot,
 * so a finished step is saved the moment it ends and its successors start at once, without
 * waiting for a superstep boundary (see ARCHITECTURE.md).
 *
 * The node returns when nothing runs and nothing can start: the run is finished (its final
 * status and terminal event are written in this superstep, graphs/finish.ts), halted (the
 * compensation node follows), or waits for confirmations (then the approval node interrupts and
 * routes back here). A run given its plan starts here (its first execution accepts the plan).
 *
 * The concerns live beside this loop: attempt.ts (what runs, confirmation, the attempt task),
 * execute.ts (the one place a skill executes), outcomes.ts (what follows each completion),
 * decisions.ts (waits and decisions), reconcile.ts (attempts in doubt).
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { ErrorCode, ToolchainError, toStepError } from "../../src/kernel/errors.js";
import type { Claims } from "../../src/kernel/scheduler.js";
import { compilePlanAsync } from "../../src/plan/validate.js";
import { versionShifted } from "../../src/skills/version.js";
import { emitter } from "../emit.js";
import { finishRun } from "../finish.js";
import { acceptGivenPlan, unplanned } from "../planner-node.js";
import { compiledFor, type RuntimeEnv } from "../env.js";
import type { RunState, RunUpdate } from "../state.js";
import { argsFor, launch, unitOf } from "./attempt.js";
import { isNotRun, SchedulerRun, type Completion } from "./context.js";
import { answers, applyDecision, offered } from "./decisions.js";
import { handle } from "./outcomes.js";
import { reconcile } from "./reconcile.js";
import { seedOf } from "../io.js";
import { versionUnavailableError } from "../../src/skills/version-errors.js";
import { EventType } from "../../src/kernel/events.js";

export function makeSchedulerNode(env: RuntimeEnv) {
  return async function scheduler(input: RunState, config: LangGraphRunnableConfig): Promise<RunUpdate> {
    const t0 = env.now();
    // a given plan enters here (graphs/toolchain.ts `entry`): accepted in this superstep, not a planner's
    const accepted = unplanned(input) ? await acceptGivenPlan(input, config, env) : {};
    const state = { ...input, ...accepted } as RunState;
    const emit = emitter(config, env, state);
    // the run ends in this superstep unless it halted (compensation), waits (approval) or drained
    const end = (update: RunUpdate): RunUpdate => {
      const out = { ...accepted, ...update };
      return out.halt || out.segmentEnded || out.status === "waiting_confirmation"
        ? out
        : finishRun(input, out, emit, env);
    };
    if (accepted.status === "failed") return end({});
    let compiled: Awaited<ReturnType<typeof compilePlanAsync>>;
    try {
      compiled = await compiledFor(env, state.runId, state.plan, () =>
        compilePlanAsync(state.plan, {
          registry: env.registry,
          skipArgumentsOf: versionShifted(state.skillVersions, (n) => env.registry.get(n)),
        }),
      );
    } catch (e) {
      // the plan was validated before the run started; one that no longer validates was edited
      // in the checkpoint (Studio's "edit state", updateState): end the run with the code
      // rather than throw and leave the thread stuck at this node
      return end({ status: "failed", error: toStepError(e), segmentEnded: false, halt: null });
    }
    const run = new SchedulerRun(env, config, state, compiled, emit);
    announceRedrive(run);
    await loop(run);
    const waiting = run.sched.idsIn("parked").length > 0 && !run.halt;
    // drained before the end: a fresh execution of this node continues (see env.segmentTasks)
    const more =
      run.draining && !run.halt && (run.sched.idsIn("ready").length > 0 || run.sched.idsIn("running").length > 0);
    return end({
      segmentEnded: more,
      steps: run.touched,
      memory: run.memoryUpdate,
      completionOrder: run.completionOrder,
      status: waiting ? "waiting_confirmation" : "running",
      error: run.runError,
      halt: run.halt,
      elapsedMs: state.elapsedMs + (env.now() - t0),
      updatedAt: run.iso(),
    });
  };
}

/**
 * The redrive this execution continues, as an event (the runtime appends the same key when it
 * redrives; this covers a process that died between its checkpoint update and that append).
 */
function announceRedrive(run: SchedulerRun): void {
  const last = run.state.redrives?.at(-1);
  if (!last || last.steps.some((id) => run.state.steps[id]?.startedAt !== undefined)) return;
  run.emit(EventType.run_redriven, undefined, { ...last }, `${last.n}`);
}

/**
 * A step the Scheduler just started. One a redrive found in doubt (its last attempt may have had
 * its effect) is reconciled first, as after a crash: applied completes it, not applied starts the
 * next attempt, unknown asks a person (graphs/scheduler/reconcile.ts).
 */
function startStep(run: SchedulerRun, id: string): void {
  const r = run.rec(id);
  if (!r.redriveInDoubt) return launch(run, id);
  run.launched++;
  run.set(id, { status: "running", redriveInDoubt: false, startedAt: r.startedAt ?? run.iso() });
  reconcile(run, run.step(id), "step", r.attempts);
}

/** Serial keys and resources the Scheduler must respect for a step (of the unit that will run). */
function claimsOf(run: SchedulerRun, id: string): Claims {
  const c = run.step(id);
  const u = unitOf(run, c);
  const r = argsFor(run, c, u);
  const keys: string[] = [];
  if (u.skill.parallelSafe === false) keys.push(`skill:${u.skill.name}`);
  if ("args" in r && u.skill.serialKey) {
    const parsed = u.skill.input.safeParse(r.args);
    const k = parsed.success ? u.skill.serialKey(parsed.data) : undefined;
    if (k !== undefined) keys.push(`key:${k}`);
  }
  return { serialKeys: keys, resource: u.skill.resource };
}

/**
 * An attempt the dead process saved as failed because the cancel aborted it (it died before the
 * halt's records were saved): handled after the halt it belongs to, so the step ends cancelled,
 * not failed with its dependents skipped (the crash-point suite found it, killed at a lease beat).
 */
function stoppedByCancel(item: Completion): boolean {
  return (
    item.kind === "attempt" && !item.res.ok && !("inDoubt" in item.res) && item.res.error.code === ErrorCode.CANCELLED
  );
}

/**
 * Replay every step task whose result the checkpoint saved (nothing executes: a task without one
 * returns `notRun()`), following completed steps to their dependents, before a recorded cancel
 * halts the run. Without it a step that completed in the dead process would end "cancelled" and
 * its effect would never be compensated. An attempt whose intent the dead process claimed is in
 * doubt instead (attempt.ts `harvested`) and is reconciled: applied completes it (so the cancel
 * compensates it); not applied or unknown is applied after the halt (reconcile.ts), like the
 * not-run completions this returns.
 */
async function harvest(run: SchedulerRun): Promise<Completion[]> {
  const later: Completion[] = [];
  run.harvesting = true;
  try {
    for (;;) {
      for (const id of run.sched.start((s) => claimsOf(run, s), Infinity)) launch(run, id);
      if (!run.busy) return later;
      const item = await run.next();
      if (
        isNotRun(item) ||
        stoppedByCancel(item) ||
        (item.kind === "reconciled" && !("applied" in item.res && item.res.applied))
      )
        later.push(item);
      else handle(run, item);
    }
  } finally {
    run.harvesting = false;
  }
}

async function loop(run: SchedulerRun): Promise<void> {
  const { env, state, aborts } = run;
  const runId = run.runId;
  const onCancel = () => {
    run.haltRun(
      "cancelled",
      toStepError(aborts.cancel.reason ?? new ToolchainError(ErrorCode.CANCELLED, "run cancelled")),
    );
    run.queue.push({ kind: "wake" });
  };
  // the durable record must be written from the node's own async context: go through the queue
  const stopListening = env.controls.listen(runId, (id, decision) => run.queue.push({ kind: "offer", id, decision }));
  aborts.cancel.addEventListener("abort", onCancel, { once: true });
  // The drive stopped under this node (its lease was lost to another process, or it is shutting
  // down): stop executing at once. Running skills are aborted and nothing new starts; nothing is
  // recorded (the new owner continues from the checkpoint, an interrupted effect is in doubt there).
  const onDriveStop = () => {
    for (const ctl of aborts.attempts.values()) ctl.abort(aborts.drive!.reason);
    aborts.halt.abort();
    run.queue.push({ kind: "wake" });
  };
  aborts.drive?.addEventListener("abort", onDriveStop, { once: true });
  let deadlineTimer: NodeJS.Timeout | undefined;
  try {
    if (state.halt) run.haltRun(state.halt, state.error ?? { code: ErrorCode.CANCELLED, message: "run cancelled" });
    // a cancel recorded before this drive (a crash after it was saved): first take back what the
    // dead process finished (saved task results), so those steps count as completed and are compensated
    const notRunYet = aborts.cancel.aborted && !run.halt ? await harvest(run) : [];
    const gap = seedOf(run.config).versionUnavailable;
    if (gap && !run.halt) run.haltRun("fail_fast", versionUnavailableError(gap));
    if (aborts.cancel.aborted) onCancel();
    for (const item of notRunYet) handle(run, item); // now halted: these steps end cancelled
    const deadlineMs = run.plan.deadlineMs;
    if (deadlineMs !== undefined && !run.halt) {
      const left = deadlineMs - state.elapsedMs;
      const onDeadline = () => {
        run.haltRun("deadline", {
          code: ErrorCode.DEADLINE_EXCEEDED,
          message: `plan deadline of ${deadlineMs} ms exceeded`,
        });
        run.queue.push({ kind: "wake" });
      };
      if (left <= 0) onDeadline();
      else deadlineTimer = setTimeout(onDeadline, left);
    }
    for (const [id, d] of Object.entries(state.decisions)) if (d && answers(run, id, d)) applyDecision(run, id, d);
    for (const [id, d] of env.controls.take(runId)) offered(run, id, d);

    if (aborts.drive?.aborted) onDriveStop();
    for (;;) {
      if (aborts.drive?.aborted)
        throw aborts.drive.reason ?? new ToolchainError(ErrorCode.RUN_NOT_ACTIVE, "the drive stopped");
      if (!run.halt && !run.draining)
        for (const id of run.sched.start((s) => claimsOf(run, s), env.segmentTasks - run.launched)) startStep(run, id);
      if (run.launched >= env.segmentTasks) run.draining = true;
      if (!run.busy) break;
      handle(run, await run.next());
    }
  } finally {
    clearTimeout(deadlineTimer);
    stopListening();
    // offers that raced with the exit go back to the inbox: the approval node takes them
    for (const item of run.queue.drain()) if (item.kind === "offer") env.controls.offer(runId, item.id, item.decision);
    aborts.cancel.removeEventListener("abort", onCancel);
    aborts.drive?.removeEventListener("abort", onDriveStop);
  }
}
