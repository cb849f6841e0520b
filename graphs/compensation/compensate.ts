/**
 * One step's compensation: its attempts, each a durable pinned task (a crash mid-rollback replays
 * finished compensations from the checkpoint instead of running them again), retried per the
 * step's policy (`afterCompensationAttempt`). Every attempt runs under a timeout (the step's
 * `timeoutMs`, else env.compensationTimeoutMs) and the run's cancel signal: a hung compensation
 * is abandoned like a hung step. A rollback skill runs through the one attempt path
 * (`executeSkill`), like any other skill.
 */
import { DEFAULT_WORKSPACE } from "../../src/kernel/workspace.js";
import { abortableSleep } from "../../src/kernel/sleep.js";
import { ErrorCode, ToolchainError, toStepError, type StepError } from "../../src/kernel/errors.js";
import { afterCompensationAttempt, type CompensationAttemptOutcome } from "../../src/kernel/after-compensation.js";
import { resolveArguments } from "../../src/plan/refs.js";
import type { CompiledStep } from "../../src/plan/validate.js";
import { traced } from "../../src/telemetry/tool-spans.js";
import { callDurable } from "../durable-task.js";
import { executeSkill } from "../scheduler/execute.js";
import type { StepRecord } from "../state.js";
import type { Undo } from "./how.js";
import type { Walk } from "./walk.js";

export type Compensated = { ok: true; attempts: number } | { ok: false; error: StepError; attempts: number };

export async function compensate(w: Walk, c: CompiledStep, r: StepRecord, how: Undo): Promise<Compensated> {
  // the round is the number of compensation attempts before this pass (an operator's retry
  // starts a new pass): together with the attempt it names each compensation task uniquely
  const round = r.rollbackAttempts ?? 0;
  for (let attempt = 1; ; attempt++) {
    const outcome = await callDurable(
      w.config,
      { kind: "compensate", stepId: c.id, stepIndex: c.index, attempt, round },
      // one `compensate <skill>` span per compensation attempt (a rollback skill's execute_tool is its child)
      () =>
        traced(
          () => ({
            name: `compensate ${how.skill.name}`,
            parent: w.env.controls.traceContext(w.runId),
            attributes: {
              "gen_ai.tool.name": how.skill.name,
              "toolchain.run.id": w.runId,
              "toolchain.step.id": c.id,
              "toolchain.attempt": attempt,
              "toolchain.compensation.round": round,
              "toolchain.compensation.how": how.kind,
            },
          }),
          () => attemptOnce(w, c, how, attempt, round),
          (o) => o,
        ),
    );
    const stopped = w.stopSignal.aborted ? toStepError(w.stopSignal.reason) : undefined;
    const next = afterCompensationAttempt({ outcome, attempt, stopped, retry: c.retry, random: w.env.random });
    if (next.kind === "done") return { ok: true, attempts: attempt };
    if (next.kind === "give_up") return { ok: false, error: next.error, attempts: attempt };
    await abortableSleep(next.delayMs, w.stopSignal).catch(() => undefined);
  }
}

/** One compensation attempt: the body of its durable task. */
async function attemptOnce(
  w: Walk,
  c: CompiledStep,
  how: Undo,
  attempt: number,
  round: number,
): Promise<CompensationAttemptOutcome> {
  const { env, runId, state, stopSignal } = w;
  // LangGraph saves a task's result asynchronously; our own marker is written before the
  // walk moves on, so a crash right after a compensation never runs it a second time
  const doneKey = `${c.id}#compensated`;
  if (await env.intents.hasIntent(runId, doneKey, 0)) return { ok: true };
  const timeoutMs = c.step.timeoutMs ?? env.compensationTimeoutMs;
  if (stopSignal.aborted)
    return {
      ok: false,
      error: toStepError(stopSignal.reason ?? new ToolchainError(ErrorCode.CANCELLED, "run cancelled")),
    };
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = AbortSignal.any([stopSignal, timeout]);
  const logger = env.logger(runId, c.id);
  const e = how.effect;
  const effectKey = e.unit === "fallback" ? `${runId}:${c.id}:fallback` : `${runId}:${c.id}`;
  const cc = {
    runId,
    stepId: c.id,
    workspaceId: state.workspaceId ?? DEFAULT_WORKSPACE,
    effectKey,
    idempotencyKey: `${effectKey}:compensate`,
    signal,
    logger,
    input: e.input,
    output: e.output,
  };
  try {
    if (how.kind === "compensate") await abandonOnAbort(() => how.skill.compensate!(cc), signal, timeout, timeoutMs);
    else if (how.kind === "delete_created")
      await abandonOnAbort(
        () => how.skill.createdRecords!.delete(how.skill.createdRecords!.list(e.output, e.input), cc),
        signal,
        timeout,
        timeoutMs,
      );
    else {
      const args = resolveArguments(
        how.arguments,
        { context: state.context, memory: state.memory, steps: w.outputs, self: { input: e.input, output: e.output } },
        "rollback.arguments",
        { stepId: c.id },
      );
      // a rollback skill executes through the one attempt path, like any other skill
      const a = await executeSkill(env, w.emit, {
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
        kind: "compensation",
      });
      // in doubt (a dead process claimed this attempt): never repeated blindly, an operator decides
      if (!a.ok) return { ok: false, error: a.error, final: "inDoubt" in a };
    }
    await env.intents.claimIntent(runId, doneKey, 0);
    return { ok: true };
  } catch (e) {
    return { ok: false, error: toStepError(e) };
  }
}

/**
 * Await a compensation, but stop waiting when its signal aborts (cancel or timeout): a
 * compensation that ignores its signal is abandoned, not awaited, exactly like a step attempt.
 */
async function abandonOnAbort(
  fn: () => Promise<unknown>,
  signal: AbortSignal,
  timeout: AbortSignal,
  timeoutMs: number,
): Promise<void> {
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () =>
      reject(
        timeout.aborted
          ? new ToolchainError(ErrorCode.TIMEOUT, `compensation timed out after ${timeoutMs} ms`)
          : (signal.reason ?? new ToolchainError(ErrorCode.CANCELLED, "compensation aborted")),
      );
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
  aborted.catch(() => undefined);
  try {
    await Promise.race([fn(), aborted]);
  } catch (e) {
    if (signal.aborted)
      throw timeout.aborted
        ? new ToolchainError(ErrorCode.TIMEOUT, `compensation timed out after ${timeoutMs} ms`)
        : (signal.reason ?? e);
    throw e;
  } finally {
    signal.removeEventListener("abort", onAbort!);
  }
}
