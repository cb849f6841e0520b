/**
 * The one place a skill executes. Every execution (a step's skill, its fallback skill, a retry, a
 * reconciled or approved re-run, a rollback skill) goes through `executeSkill`, which applies in
 * order: the run's allowlist, limits across runs, the durable intent claim for a non-idempotent
 * effect, then the attempt itself (input check, timeout, abort, output check, storable result).
 * Confirmation and preview come before it (graphs/scheduler/attempt.ts for steps and fallbacks,
 * the compensation node for rollback skills), with the same rule (src/kernel/confirmation.ts).
 * No other code calls `executeAttempt`.
 */
import type { Context } from "@opentelemetry/api";
import { ErrorCode } from "../../src/kernel/errors.js";
import { executeAttempt, type AttemptResult } from "../../src/kernel/execute-attempt.js";
import { hasSideEffects, type Skill } from "../../src/skills/contract.js";
import type { Emit } from "../emit.js";
import type { RuntimeEnv } from "../env.js";
import { isGated, limitClaims, runGated } from "../limit-gate.js";
import type { InDoubt } from "./context.js";
import { toolAttributes, toolOutcome, traced, type ExecutionKind } from "../../src/telemetry/tool-spans.js";

export interface Execution {
  skill: Skill;
  args: Record<string, unknown>;
  runId: string;
  stepId: string;
  attempt: number;
  /** The intent log's key for this execution (a step: its id; a fallback: `id#fallback`). */
  intentKey: string;
  idempotencyKey: string;
  context: unknown;
  workspaceId: string | undefined;
  /** The run's allowlist (skill names); null: every registered skill. */
  allowed: readonly string[] | null | undefined;
  signal: AbortSignal;
  timeoutMs?: number;
  /**
   * Emits the start event once a gated attempt holds its limits. An attempt without limits is
   * reported by the caller before its durable task (`holdsLimits` false), so a replay reports it too.
   */
  started: () => void;
  /** What the intent message calls this execution ("attempt 2", "fallback attempt 1"). */
  label: string;
  /** What this execution is, on its span (`toolchain.execution.kind`). @default "step" */
  kind?: ExecutionKind;
}

/** An attempt whose intent a dead process claimed and whose result was never saved. */
export function inDoubtResult(label: string): InDoubt {
  return {
    ok: false,
    inDoubt: true,
    durationMs: 0,
    error: {
      code: ErrorCode.EXECUTION_FAILED,
      message: `${label} was interrupted by a process failure; its effect may or may not have happened`,
    },
  };
}

/** Whether an execution of `skill` with `args` waits for limits across runs before it starts. */
export function holdsLimits(env: RuntimeEnv, skill: Skill, args: unknown): boolean {
  return isGated(env, limitClaims(skill, args));
}

/**
 * One `execute_tool <skill>` span per execution (src/telemetry/tool-spans.ts), the skill running
 * under it; a no-op when tracing is off. Replayed executions return their saved result without
 * reaching here, so a span is never recorded twice.
 */
export function executeSkill(env: RuntimeEnv, emit: Emit, x: Execution): Promise<AttemptResult | InDoubt> {
  return traced(
    () => ({
      name: `execute_tool ${x.skill.name}`,
      parent: env.controls.traceContext(x.runId),
      attributes: toolAttributes({
        runId: x.runId,
        stepId: x.stepId,
        skillName: x.skill.name,
        sideEffects: x.skill.sideEffects,
        attempt: x.attempt,
        idempotencyKey: x.idempotencyKey,
        kind: x.kind ?? "step",
        args: x.args,
      }),
    }),
    (ctx) => executeGated(env, emit, x, ctx),
    toolOutcome,
  );
}

function executeGated(
  env: RuntimeEnv,
  emit: Emit,
  x: Execution,
  traceContext: Context | undefined,
): Promise<AttemptResult | InDoubt> {
  if (x.allowed && !x.allowed.includes(x.skill.name)) {
    // validation refused it at admission; a plan edited in the checkpoint (Studio, updateState) must not reach it either
    return Promise.resolve({
      ok: false,
      durationMs: 0,
      error: {
        code: ErrorCode.SKILL_NOT_ALLOWED,
        message: `skill "${x.skill.name}" is not allowed in this run's workspace`,
        effectStarted: false,
      },
    });
  }
  const claims = limitClaims(x.skill, x.args);
  const attempt = () =>
    executeAttempt({
      skill: x.skill,
      args: x.args,
      runId: x.runId,
      stepId: x.stepId,
      attempt: x.attempt,
      idempotencyKey: x.idempotencyKey,
      context: x.context,
      workspaceId: x.workspaceId,
      logger: env.logger(x.runId, x.stepId),
      signal: x.signal,
      timeoutMs: x.timeoutMs,
      traceContext,
    });
  // not async frames: the attempt's own promise is what the task awaits (a few promises fewer per step)
  const body = (): Promise<AttemptResult | InDoubt> =>
    hasSideEffects(x.skill) && !x.skill.idempotent
      ? // a dead process that claimed this attempt may have done the effect: never run it again blindly
        env.intents
          .claimIntent(x.runId, x.intentKey, x.attempt)
          .then((claimed) => (claimed ? attempt() : inDoubtResult(x.label)))
      : attempt();
  // limits across runs (graphs/limit-gate.ts): held only while the attempt runs
  if (!isGated(env, claims)) return body();
  return runGated(
    env,
    emit,
    { runId: x.runId, stepId: x.stepId, attempt: x.attempt },
    claims,
    x.signal,
    x.started,
    body,
    (error) => ({ ok: false, durationMs: 0, error }),
  );
}
