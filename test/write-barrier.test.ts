/**
 * Events never run ahead of the checkpoint writes they report: LangGraph saves a finished task's
 * result in the background, so without the barrier (src/runtime/write-barrier.ts) a step's
 * `step_completed` could be stored while its result was not, and a process killed in between
 * would execute the step again (found by the crash-point suite at task_returned on server
 * Postgres). Here every task-result write is slowed down: whenever the store receives a step's
 * completion, that run has no checkpoint write in flight and the saver holds the step's result.
 */
import { MemorySaver, type BaseCheckpointSaver } from "@langchain/langgraph";
import { describe, expect, test } from "vitest";
import { createRuntime } from "../src/runtime/runtime.js";
import { Gates, gateSkill } from "./helpers/skills.js";

/** A saver whose task-result writes take `ms` to commit; counts writes in flight per thread. */
function slowWrites(ms: number) {
  const inner = new MemorySaver();
  const inflight = new Map<string, number>();
  const committed: { thread: string; taskId: string; channels: string[] }[] = [];
  const saver = Object.create(inner) as BaseCheckpointSaver;
  saver.putWrites = async (config, writes, taskId) => {
    const thread = String(config.configurable?.thread_id);
    inflight.set(thread, (inflight.get(thread) ?? 0) + 1);
    try {
      await new Promise((r) => setTimeout(r, ms));
      await inner.putWrites(config, writes, taskId);
      committed.push({ thread, taskId, channels: writes.map(([c]) => c) });
    } finally {
      inflight.set(thread, inflight.get(thread)! - 1);
    }
  };
  return { saver, inflight, committed };
}

describe("event batches wait for the checkpoint writes they report", () => {
  test("a step's completion is stored only after its result is saved (slow task writes)", async () => {
    const gates = new Gates();
    const slow = slowWrites(150);
    const rt = createRuntime({ skills: [gateSkill(gates, new Map())], checkpointer: slow.saver });
    const seen: { stepId: string; inflight: number; returns: number }[] = [];
    rt.store.onChange(({ runId, events }) => {
      for (const e of events) {
        if (e.type !== "step_completed") continue;
        seen.push({
          stepId: e.stepId!,
          inflight: slow.inflight.get(runId) ?? 0,
          returns: slow.committed.filter((w) => w.thread === runId && w.channels.includes("__return__")).length,
        });
      }
    });
    // a completes while b is held: nothing else writes for the run until b's gate opens
    const h = rt.run({
      steps: [
        { stepId: "a", skillName: "core.pass", arguments: { value: 1 } },
        { stepId: "b", skillName: "test.gate", dependsOn: ["a"], arguments: { gate: "b" } },
      ],
    });
    await gates.untilEntered("b");
    await new Promise((r) => setTimeout(r, 400));
    expect(seen.map((s) => s.stepId)).toEqual(["a"]);
    expect(seen[0]).toMatchObject({ inflight: 0 });
    expect(seen[0]!.returns).toBeGreaterThanOrEqual(1); // a's result was saved before its event
    gates.open("b");
    const view = await h.result;
    expect(view.status).toBe("completed");
    expect(seen.map((s) => s.stepId)).toEqual(["a", "b"]);
    expect(seen.every((s) => s.inflight === 0)).toBe(true);
    expect(rt.writes.pending(h.runId)).toBe(0);
  });
});
