/**
 * Durable units of work inside a node, as functional-API tasks.
 *
 * Why the pinning: LangGraph derives a task's id from its parent task and a per-node call
 * counter, i.e. from call ORDER. Our scheduler launches steps in completion order, which is
 * timing-dependent; when a node re-executes (resume, crash recovery) cached results would be
 * matched to the wrong calls. Setting the counter to a slot derived from (step, kind, attempt) just
 * before the call makes each task's id a pure function of what it is, so replay finds exactly
 * the results it wrote. The counter is read synchronously at call time (pregel/runner.js `call`).
 * Covered by test/replay.test.ts, which fails if this ever stops holding.
 */
import { task } from "@langchain/langgraph";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";

const SCRATCHPAD = "__pregel_scratchpad";
export const SLOTS_PER_STEP = 32;
export const Slot = {
  preview: 0,
  /** attempts 1..MAX_ATTEMPTS use slots 1..10 */
  attempt: (n: number) => n,
  fallback: 11,
  decision: 12,
  reconcile: 13,
  /** compensation attempts use 16..26 */
  compensation: (n: number) => 15 + n,
} as const;

export function callDurable<T>(config: LangGraphRunnableConfig, name: string, stepIndex: number, slot: number, fn: () => Promise<T>): Promise<T> {
  const pad = (config.configurable as Record<string, unknown> | undefined)?.[SCRATCHPAD] as { callCounter?: number } | undefined;
  if (!pad || typeof pad.callCounter !== "number") {
    throw new Error("callDurable must run inside a LangGraph node (no scratchpad found)");
  }
  pad.callCounter = stepIndex * SLOTS_PER_STEP + slot;
  return task({ name }, fn)() as Promise<T>;
}
