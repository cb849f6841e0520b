/**
 * One rollback walk: what a compensation node execution works on (the run's state, the compiled
 * plan, the cancel signal) and the step records it changes, kept apart from the state it read.
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { assertStepTransition } from "../../src/kernel/status.js";
import type { RollbackMode } from "../../src/plan/schema.js";
import type { CompiledPlan } from "../../src/plan/validate.js";
import { emitter, type Emit } from "../emit.js";
import type { RuntimeEnv } from "../env.js";
import type { RunState, StepRecord } from "../state.js";

export interface Walk {
  env: RuntimeEnv;
  config: LangGraphRunnableConfig;
  state: RunState;
  compiled: CompiledPlan;
  mode: RollbackMode;
  runId: string;
  emit: Emit;
  /** The run's cancel, as far as it reaches compensations. */
  stopSignal: AbortSignal;
  /** Outputs a rollback skill's arguments may reference (`steps.<id>`). */
  outputs: Record<string, unknown>;
  /** The records this walk changed (the node's update). */
  touched: Record<string, StepRecord>;
  /** A step's record as this walk left it so far. */
  rec(id: string): StepRecord;
  /** Change a step's record (a status change must be a legal transition). */
  set(id: string, patch: Partial<StepRecord>): StepRecord;
}

export function openWalk(
  env: RuntimeEnv,
  config: LangGraphRunnableConfig,
  state: RunState,
  compiled: CompiledPlan,
): Walk {
  const runId = state.runId;
  const touched: Record<string, StepRecord> = {};
  const rec = (id: string) => touched[id] ?? state.steps[id]!;
  const set = (id: string, patch: Partial<StepRecord>) => {
    if (patch.status) assertStepTransition(id, rec(id).status, patch.status);
    return (touched[id] = { ...rec(id), ...patch });
  };
  const outputs: Record<string, unknown> = {};
  for (const [id, r] of Object.entries(state.steps))
    if (r.status === "completed" || r.status === "rolled_back" || r.status === "rollback_failed")
      outputs[id] = r.output;
  // A cancel reaches compensations, except the cancel that started this rollback (it is the
  // reason the rollback runs; the signal of the drive that applies it is aborted already).
  const stopSignal = state.halt === "cancelled" ? new AbortController().signal : env.controls.signal(runId);
  return {
    env,
    config,
    state,
    compiled,
    mode: compiled.plan.rollbackMode,
    runId,
    emit: emitter(config, env, state),
    stopSignal,
    outputs,
    touched,
    rec,
    set,
  };
}
