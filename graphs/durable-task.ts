/**
 * Durable units of work inside a node, as functional-API tasks.
 *
 * LangGraph identifies a task by uuid5(namespace, superstep, task NAME, parent task, CALL COUNTER)
 * under the node's checkpoint (pregel/algo.js `_prepareSingleTask`). The counter is call order,
 * and our scheduler launches work in completion order, which is timing-dependent: when a node
 * re-executes (resume, crash recovery) cached results would be matched to the wrong calls.
 *
 * So every durable task carries its full identity, `(kind, step, attempt, round)`, in its name,
 * and the counter is pinned to the step's index right before the call. A task's id is then a pure
 * function of what it is: replay finds exactly the results it wrote, and two distinct pieces of
 * work (a reconcile of attempt 1 and of attempt 2; the decision of round 0 and of round 1) can
 * never share a saved result. `test/durable-identity.property.test.ts` checks the injectivity;
 * `test/replay.test.ts` fails if the pinning ever stops holding.
 */
import { task } from "@langchain/langgraph";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";

const SCRATCHPAD = "__pregel_scratchpad";

export type TaskKind = "preview" | "step" | "fallback" | "reconcile" | "reconcile_fallback" | "decision" | "compensate";

export interface TaskIdentity {
  kind: TaskKind;
  stepId: string;
  /** The step's index in the plan (unique per step). */
  stepIndex: number;
  /** step / fallback / compensate: the attempt number; reconcile(_fallback): the attempt being reconciled. */
  attempt?: number;
  /** decision: the wait round answered; compensate: the operator round (0 before any decision). */
  round?: number;
}

/**
 * `kind.stepId[#aN][#rN]`. Step ids match /^[A-Za-z][A-Za-z0-9_-]*$/ (no "." or "#"), so the
 * name parses back to its identity: distinct identities give distinct names.
 */
export function taskName(t: TaskIdentity): string {
  let name = `${t.kind}.${t.stepId}`;
  if (t.attempt !== undefined) name += `#a${t.attempt}`;
  if (t.round !== undefined) name += `#r${t.round}`;
  return name;
}

/** What LangGraph hashes into the task id besides the node's checkpoint: (name, counter). */
export function taskKey(t: TaskIdentity): { name: string; counter: number } {
  return { name: taskName(t), counter: t.stepIndex };
}

export function callDurable<T>(config: LangGraphRunnableConfig, t: TaskIdentity, fn: () => Promise<T>): Promise<T> {
  const pad = (config.configurable as Record<string, unknown> | undefined)?.[SCRATCHPAD] as { callCounter?: number } | undefined;
  if (!pad || typeof pad.callCounter !== "number") {
    throw new Error("callDurable must run inside a LangGraph node (no scratchpad found)");
  }
  const { name, counter } = taskKey(t);
  pad.callCounter = counter;
  return task({ name }, fn)() as Promise<T>;
}
