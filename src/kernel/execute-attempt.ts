/**
 * One attempt of one step: input validation, the skill call under a timeout and the run's abort
 * signal, output validation. Errors come back as values so a failed attempt is as durable as a
 * successful one.
 */
import type { Context } from "@opentelemetry/api";
import { z } from "zod";
import { traceHeaders } from "../telemetry/tracing.js";
import { ErrorCode, ToolchainError, toStepError, type StepError } from "./errors.js";
import type { Skill, SkillContext, SkillLogger } from "../skills/contract.js";
import { storableError, unstorableResult } from "./storable.js";
import { DEFAULT_WORKSPACE } from "./workspace.js";

export type AttemptResult =
  { ok: true; output: unknown; durationMs: number } | { ok: false; error: StepError; durationMs: number };

export interface AttemptInput {
  skill: Skill;
  args: unknown;
  runId: string;
  stepId: string;
  attempt: number;
  idempotencyKey: string;
  context: unknown;
  /** The run's workspace (SkillContext.workspaceId). @default DEFAULT_WORKSPACE */
  workspaceId?: string;
  logger: SkillLogger;
  /** The step's own controller, aborted by the run (cancel, fail_fast, deadline). */
  signal: AbortSignal;
  timeoutMs?: number;
  /** The execution's span context (tracing on): handed to the skill (SkillContext.traceContext). */
  traceContext?: Context;
}

/**
 * One attempt, with its result made safe to store: an output the run history cannot hold (NUL,
 * lone surrogate, bigint, NaN, too deep, a `__proto__` key) fails the attempt with
 * UNSUPPORTED_VALUE (deterministic: not retried by default); error text is made storable.
 */
export function executeAttempt(a: AttemptInput): Promise<AttemptResult> {
  return runAttempt(a).then((r) => {
    if (!r.ok) return { ...r, error: storableError(r.error) };
    const bad = unstorableResult(r.output, "output", a.skill.name);
    return bad ? { ok: false, durationMs: r.durationMs, error: bad } : r;
  });
}

/** Not an async frame: the skill's settlement is the one promise an attempt adds (a few fewer per step). */
function runAttempt(a: AttemptInput): Promise<AttemptResult> {
  try {
    return startAttempt(a);
  } catch (e) {
    return Promise.reject(e); // a schema whose transform throws rejects, as it did in an async frame
  }
}

function startAttempt(a: AttemptInput): Promise<AttemptResult> {
  const t0 = performance.now();
  const took = () => performance.now() - t0;
  const parsed = a.skill.input.safeParse(a.args);
  if (!parsed.success) {
    return Promise.resolve({
      ok: false,
      durationMs: took(),
      error: {
        code: ErrorCode.INVALID_INPUT,
        message: `input does not match ${a.skill.name}: ${z.prettifyError(parsed.error).replace(/\n/g, "; ")}`,
        effectStarted: false,
      },
    });
  }
  if (a.signal.aborted)
    return Promise.resolve({
      ok: false,
      durationMs: took(),
      error: { ...toStepError(a.signal.reason), effectStarted: false },
    });

  const timeout = a.timeoutMs !== undefined ? AbortSignal.timeout(a.timeoutMs) : undefined;
  const signal = timeout ? AbortSignal.any([a.signal, timeout]) : a.signal;
  const ctx: SkillContext = {
    runId: a.runId,
    stepId: a.stepId,
    attempt: a.attempt,
    idempotencyKey: a.idempotencyKey,
    signal,
    logger: a.logger,
    context: a.context,
    workspaceId: a.workspaceId ?? DEFAULT_WORKSPACE,
    ...(a.traceContext ? { traceContext: a.traceContext } : {}),
    traceHeaders: () => (a.traceContext ? traceHeaders(a.traceContext) : {}),
  };
  let onAbort: (() => void) | undefined;
  // A skill that ignores its signal cannot hold the run hostage: the abort ends the attempt.
  // One promise settled by whichever comes first (not a race of two).
  const settled = new Promise<unknown>((resolve, reject) => {
    onAbort = () => reject(abortError(signal, timeout, a.timeoutMs));
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    // Promise.resolve: a skill may return a plain value (it returns a native promise as is)
    Promise.resolve(a.skill.execute(parsed.data, ctx)).then(resolve, reject);
  });
  const stopListening = () => {
    if (onAbort) signal.removeEventListener("abort", onAbort);
  };
  const failed = (e: unknown): AttemptResult => {
    stopListening();
    const err = signal.aborted ? abortError(signal, timeout, a.timeoutMs) : e;
    return { ok: false, durationMs: took(), error: toStepError(err) };
  };
  return settled.then((output): AttemptResult => {
    try {
      stopListening();
      if (!a.skill.output) return { ok: true, output: output ?? null, durationMs: took() };
      const out = a.skill.output.safeParse(output);
      if (out.success) return { ok: true, output: out.data ?? null, durationMs: took() };
      return {
        ok: false,
        durationMs: took(),
        error: {
          code: ErrorCode.INVALID_OUTPUT,
          message: `output of ${a.skill.name} does not match its schema: ${z.prettifyError(out.error).replace(/\n/g, "; ")}`,
          effectStarted: true,
        },
      };
    } catch (e) {
      return failed(e);
    }
  }, failed);
}

function abortError(signal: AbortSignal, timeout: AbortSignal | undefined, timeoutMs: number | undefined): unknown {
  if (timeout?.aborted) return new ToolchainError(ErrorCode.TIMEOUT, `step timed out after ${timeoutMs} ms`);
  return signal.reason ?? new ToolchainError(ErrorCode.CANCELLED, "step aborted");
}
