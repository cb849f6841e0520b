/**
 * The scheduler node: drives the pure Scheduler with real work. Each step attempt (and each
 * preview, reconcile and consumed decision) is a durable functional-API task pinned to a slot,
 * so a finished step is saved the moment it ends and its successors start at once, without
 * waiting for a superstep boundary (see ARCHITECTURE.md).
 *
 * The node returns when nothing runs and nothing can start: the run is finished, halted, or
 * waits for confirmations (then the approval node interrupts and routes back here).
 *
 * The concerns live beside this loop: attempt.ts (what runs, confirmation, the attempt task),
 * execute.ts (the one place a skill executes), outcomes.ts (what follows each completion),
 * decisions.ts (waits and decisions), reconcile.ts (attempts in doubt).
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { ErrorCode, ToolchainError, toStepError } from "../../src/kernel/errors.js";
import type { Claims } from "../../src/kernel/scheduler.js";
import { compilePlanAsync } from "../../src/plan/validate.js";
import { emitter } from "../emit.js";
import { compiledFor, type RuntimeEnv } from "../env.js";
import type { RunState, RunUpdate } from "../state.js";
import { argsFor, launch, unitOf } from "./attempt.js";
import { SchedulerRun } from "./context.js";
import { answers, applyDecision, offered } from "./decisions.js";
import { handle } from "./outcomes.js";

export function makeSchedulerNode(env: RuntimeEnv) {
  return async function scheduler(state: RunState, config: LangGraphRunnableConfig): Promise<RunUpdate> {
    const t0 = env.now();
    let compiled: Awaited<ReturnType<typeof compilePlanAsync>>;
    try {
      compiled = await compiledFor(env, state.runId, state.plan, () => compilePlanAsync(state.plan, { registry: env.registry }));
    } catch (e) {
      // the plan was validated before the run started; one that no longer validates was edited
      // in the checkpoint (Studio's "edit state", updateState): end the run with the code
      // rather than throw and leave the thread stuck at this node
      return { status: "failed", error: toStepError(e), segmentEnded: false, halt: null, updatedAt: new Date(env.now()).toISOString() };
    }
    const run = new SchedulerRun(env, config, state, compiled, emitter(config, env));
    await loop(run);
    const waiting = run.sched.idsIn("parked").length > 0 && !run.halt;
    // drained before the end: a fresh execution of this node continues (see env.segmentTasks)
    const more = run.draining && !run.halt && (run.sched.idsIn("ready").length > 0 || run.sched.idsIn("running").length > 0);
    return {
      segmentEnded: more,
      steps: run.touched,
      memory: run.memoryUpdate,
      completionOrder: run.completionOrder,
      status: waiting ? "waiting_confirmation" : "running",
      error: run.runError,
      halt: run.halt,
      elapsedMs: state.elapsedMs + (env.now() - t0),
      updatedAt: run.iso(),
    };
  };
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

async function loop(run: SchedulerRun): Promise<void> {
  const { env, state, aborts } = run;
  const runId = run.runId;
  const onCancel = () => {
    run.haltRun("cancelled", toStepError(aborts.cancel.reason ?? new ToolchainError(ErrorCode.CANCELLED, "run cancelled")));
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
    if (aborts.cancel.aborted) onCancel();
    const deadlineMs = run.plan.deadlineMs;
    if (deadlineMs !== undefined && !run.halt) {
      const left = deadlineMs - state.elapsedMs;
      const onDeadline = () => {
        run.haltRun("deadline", { code: ErrorCode.DEADLINE_EXCEEDED, message: `plan deadline of ${deadlineMs} ms exceeded` });
        run.queue.push({ kind: "wake" });
      };
      if (left <= 0) onDeadline();
      else deadlineTimer = setTimeout(onDeadline, left);
    }
    for (const [id, d] of Object.entries(state.decisions)) if (d && answers(run, id, d)) applyDecision(run, id, d);
    for (const [id, d] of env.controls.take(runId)) offered(run, id, d);

    if (aborts.drive?.aborted) onDriveStop();
    for (;;) {
      if (aborts.drive?.aborted) throw aborts.drive.reason ?? new ToolchainError(ErrorCode.RUN_NOT_ACTIVE, "the drive stopped");
      if (!run.halt && !run.draining) for (const id of run.sched.start((s) => claimsOf(run, s), env.segmentTasks - run.launched)) launch(run, id);
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
