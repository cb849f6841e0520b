/**
 * Named crash points for the fault-injection suite (`npm run test:faults`). Compiled in always,
 * inert unless the process was started with:
 *
 * - `TOOLCHAIN_FAULT=point:n[,point:n…]`: SIGKILL this process at the n-th passage of `point`;
 * - `TOOLCHAIN_FAULT_RECORD=<file>`: append `point:n` for every passage (how the suite learns
 *   which kill points a clean run of a plan shape passes).
 *
 * The fast path is a single boolean check, so production pays nothing.
 */
import { appendFileSync } from "node:fs";

export const FaultPoint = {
  /** A durable intent was claimed; the non-idempotent effect has not started. */
  intent_claimed: "intent_claimed",
  /** A skill's execute returned; LangGraph has not saved the task's result. */
  effect_returned: "effect_returned",
  /** The scheduler received a task's result (LangGraph saves it asynchronously around here). */
  task_returned: "task_returned",
  /** A batch of events was appended to the event log. */
  event_batch_appended: "event_batch_appended",
  /** A human decision was recorded in the run store; the run was not resumed yet. */
  decision_recorded: "decision_recorded",
  /** A compensation finished; its "done" marker is not written yet. */
  compensation_done: "compensation_done",
  /** A compensation's "done" marker was written. */
  compensation_marked: "compensation_marked",
  /** A lease heartbeat succeeded. */
  lease_renewed: "lease_renewed",
  /** The drive wrote the final projection of the run. */
  final_sync: "final_sync",
} as const;
export type FaultPoint = (typeof FaultPoint)[keyof typeof FaultPoint];

const kills = parse(process.env.TOOLCHAIN_FAULT);
const recordFile = process.env.TOOLCHAIN_FAULT_RECORD || undefined;
const active = kills.size > 0 || recordFile !== undefined;
const passages = new Map<string, number>();

function parse(spec: string | undefined): Map<string, Set<number>> {
  const m = new Map<string, Set<number>>();
  for (const part of (spec ?? "").split(",")) {
    const [point, n] = part.trim().split(":");
    if (!point || !n || !Number.isInteger(Number(n))) continue;
    if (!m.has(point)) m.set(point, new Set());
    m.get(point)!.add(Number(n));
  }
  return m;
}

/** A passage of a named crash point. */
export function fault(point: FaultPoint): void {
  if (!active) return;
  const n = (passages.get(point) ?? 0) + 1;
  passages.set(point, n);
  if (recordFile) appendFileSync(recordFile, `${point}:${n}\n`);
  if (kills.get(point)?.has(n)) {
    process.kill(process.pid, "SIGKILL");
    // SIGKILL to oneself is delivered before kill(2) returns; never run another line regardless
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  }
}
