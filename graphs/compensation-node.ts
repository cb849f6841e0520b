/**
 * Saga compensation: completed steps are undone in reverse completion order, each compensation a
 * durable pinned task (a crash mid-rollback never compensates a step twice).
 * - best_effort: every compensation is attempted (with the step's retry policy); failures are
 *   recorded and the walk goes on.
 * - strict: the first compensation that fails for good stops the walk; later steps stay untouched
 *   with rollback "pending".
 * A side-effecting step without any compensation is reported `not_compensable`, never counted
 * as rolled back.
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { abortableSleep } from "../skills/core/index.js";
import { ErrorCode, toStepError, type StepError } from "../src/kernel/errors.js";
import { EventType } from "../src/kernel/events.js";
import { executeAttempt } from "../src/kernel/execute-attempt.js";
import { hasSideEffects, type Skill } from "../src/skills/contract.js";
import { resolveArguments } from "../src/plan/refs.js";
import { decideRetry } from "../src/plan/retry-policy.js";
import { compilePlan, type CompiledStep } from "../src/plan/validate.js";
import { callDurable, Slot } from "./durable-task.js";
import { emitter } from "./emit.js";
import type { RuntimeEnv } from "./env.js";
import type { RunState, RunUpdate, StepRecord } from "./state.js";

type Plan =
  | { kind: "not_needed" }
  | { kind: "not_compensable" }
  | { kind: "skill_compensate"; skill: Skill }
  | { kind: "rollback_skill"; skill: Skill; arguments: Record<string, unknown> };

function compensationFor(c: CompiledStep, env: RuntimeEnv): Plan {
  const rb = c.step.rollback;
  if (rb?.kind === "none") return hasSideEffects(c.skill) ? { kind: "not_compensable" } : { kind: "not_needed" };
  if (rb?.kind === "skill") return { kind: "rollback_skill", skill: env.registry.get(rb.skillName)!, arguments: rb.arguments ?? {} };
  if (c.skill.compensate) return { kind: "skill_compensate", skill: c.skill };
  return hasSideEffects(c.skill) || rb?.kind === "delete_created_records" ? { kind: "not_compensable" } : { kind: "not_needed" };
}

export function makeCompensationNode(env: RuntimeEnv) {
  return async function compensation(state: RunState, config: LangGraphRunnableConfig): Promise<RunUpdate> {
    const compiled = compilePlan(state.plan, { registry: env.registry });
    const mode = compiled.plan.rollbackMode;
    const emit = emitter(config, env);
    const runId = state.runId;
    const touched: Record<string, StepRecord> = {};
    const set = (id: string, patch: Partial<StepRecord>) => (touched[id] = { ...(touched[id] ?? state.steps[id]!), ...patch });

    const order = [...state.completionOrder].reverse().filter((id) => state.steps[id]?.status === "completed");
    emit(EventType.rollback_started, undefined, { mode, steps: order });
    const outputs: Record<string, unknown> = {};
    for (const [id, r] of Object.entries(state.steps)) if (r.status === "completed") outputs[id] = r.output;

    let stopped = false;
    let failures = 0;
    for (const id of order) {
      const c = compiled.byId.get(id)!;
      const r = state.steps[id]!;
      if (stopped) {
        set(id, { rollback: "pending" });
        continue;
      }
      const how = compensationFor(c, env);
      if (how.kind === "not_needed") {
        set(id, { rollback: "not_needed" });
        continue;
      }
      if (how.kind === "not_compensable") {
        const error: StepError = { code: ErrorCode.NOT_COMPENSABLE, message: `step "${id}" (${c.skill.name}) has side effects and no compensation` };
        set(id, { rollback: "not_compensable", rollbackError: error });
        emit(EventType.step_rollback_failed, id, { error });
        failures++;
        if (mode === "strict") stopped = true;
        continue;
      }
      const result = await compensateWithRetry(c, r, how, outputs);
      if (result.ok) {
        set(id, { status: "rolled_back", rollback: "rolled_back" });
        emit(EventType.step_rolled_back, id, { attempts: result.attempts });
      } else {
        set(id, { status: "rollback_failed", rollback: "rollback_failed", rollbackError: result.error });
        emit(EventType.step_rollback_failed, id, { error: result.error, attempts: result.attempts });
        failures++;
        if (mode === "strict") stopped = true;
      }
    }
    emit(EventType.rollback_completed, undefined, { mode, ok: failures === 0, failures, stopped });
    return { steps: touched, updatedAt: new Date(env.now()).toISOString() };

    async function compensateWithRetry(c: CompiledStep, r: StepRecord, how: Extract<Plan, { kind: "skill_compensate" | "rollback_skill" }>, outs: Record<string, unknown>) {
      for (let attempt = 1; ; attempt++) {
        const res = await callDurable(config, `compensate.${c.id}`, c.index, Slot.compensation(attempt), async () => {
          const signal = new AbortController().signal;
          const logger = env.logger(runId, c.id);
          const idempotencyKey = `${runId}:${c.id}:compensate`;
          try {
            if (how.kind === "skill_compensate") {
              await how.skill.compensate!({ runId, stepId: c.id, idempotencyKey, signal, logger, input: r.input, output: r.output });
              return { ok: true as const };
            }
            const args = resolveArguments(how.arguments, { context: state.context, memory: state.memory, steps: outs }, "rollback.arguments");
            const a = await executeAttempt({ skill: how.skill, args, runId, stepId: c.id, attempt, idempotencyKey, context: state.context, logger, signal, timeoutMs: c.step.timeoutMs });
            return a.ok ? { ok: true as const } : { ok: false as const, error: a.error };
          } catch (e) {
            return { ok: false as const, error: toStepError(e) };
          }
        });
        if (res.ok) return { ok: true as const, attempts: attempt };
        const d = decideRetry(c.retry, { sideEffects: "none", idempotent: true }, res.error, attempt, env.random);
        if (!d.retry) return { ok: false as const, error: res.error, attempts: attempt };
        await abortableSleep(d.delayMs);
      }
    }
  };
}
