/**
 * Durability of steps inside the scheduler node: when the node is interrupted mid-run and
 * executed again from its checkpoint, every step that finished returns its saved result (it is
 * not executed again) and each result is matched to the right step, whatever order the replay
 * launches them in. This is what graphs/durable-task.ts's pinning guarantees.
 */
import { MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import { describe, expect, test } from "vitest";
import { defaultEnv } from "../graphs/env.js";
import { compileToolchainGraph } from "../graphs/toolchain.js";
import type { RunState } from "../graphs/state.js";
import { coreSkills, abortableSleep } from "../skills/core/index.js";
import { defineSkill } from "../src/skills/contract.js";
import { SkillRegistry } from "../src/skills/registry.js";
import { compilePlan } from "../src/plan/validate.js";

describe("replay of the scheduler node", () => {
  test("finished steps are not re-executed and results stay with their steps when replay order differs", async () => {
    const executions = new Map<string, number>();
    let round = 1;
    // Round 1: x finishes only after w completed (a gate, not a delay: a loaded machine must not
    // reorder it). Round 2 (replay): every step is immediate, so a call-order based task id would
    // hand one step's result to another.
    let releaseX!: () => void;
    const wDone = new Promise<void>((resolve) => (releaseX = resolve));
    const timed = defineSkill({
      name: "test.timed",
      description: "returns its name after a delay that depends on the round",
      input: z.object({ name: z.string(), round1Ms: z.number(), round2Ms: z.number() }),
      sideEffects: "write",
      idempotent: false,
      async execute(a, ctx) {
        executions.set(a.name, (executions.get(a.name) ?? 0) + 1);
        if (round === 1 && a.name === "x") {
          await new Promise<void>((resolve, reject) => {
            void wDone.then(resolve);
            ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason), { once: true });
          });
        }
        await abortableSleep(round === 1 ? a.round1Ms : a.round2Ms, ctx.signal);
        return `result-of-${a.name}`;
      },
    });
    const registry = new SkillRegistry([...coreSkills, timed]);
    const checkpointer = new MemorySaver();
    const graph = compileToolchainGraph(defaultEnv(registry), checkpointer);
    const plan = compilePlan(
      {
        steps: [
          // round 1: z finishes before x, so w is launched before y; on replay the cached x and z
          // resolve in declaration order, so y is launched before w
          { stepId: "x", skillName: "test.timed", arguments: { name: "x", round1Ms: 0, round2Ms: 0 } },
          { stepId: "z", skillName: "test.timed", arguments: { name: "z", round1Ms: 0, round2Ms: 0 } },
          {
            stepId: "y",
            skillName: "test.timed",
            dependsOn: ["x"],
            arguments: { name: "y", round1Ms: 0, round2Ms: 0 },
          },
          {
            stepId: "w",
            skillName: "test.timed",
            dependsOn: ["z"],
            arguments: { name: "w", round1Ms: 0, round2Ms: 0 },
          },
          { stepId: "slow", skillName: "core.wait", arguments: { ms: 2000, value: "slow-done" } },
        ],
      },
      { registry },
    ).plan;
    const config = { configurable: { thread_id: "replay-1" } };
    const input = { runId: "replay-1", plan, context: {}, memory: {} };

    // Drive until late, early and join have finished, then kill the run while "slow" runs.
    const ctl = new AbortController();
    const seen: string[] = [];
    const stream = await graph.stream(input as never, { ...config, streamMode: ["custom"], signal: ctl.signal });
    await expect(
      (async () => {
        for await (const [, chunk] of stream as AsyncIterable<
          [string, { "toolchain.event": { type: string; stepId?: string } }]
        >) {
          const e = chunk["toolchain.event"];
          if (e.type === "step_completed") seen.push(e.stepId!);
          if (e.type === "step_completed" && e.stepId === "w") releaseX();
          if (e.type === "step_completed" && e.stepId === "y") ctl.abort(new Error("simulated crash"));
        }
      })(),
    ).rejects.toThrow("simulated crash");
    expect(seen).toEqual(["z", "w", "x", "y"]);

    // Replay from the checkpoint: the scheduler node runs again from its start.
    round = 2;
    const final = (await graph.invoke(null, { ...config, streamMode: "values" })) as unknown as RunState;
    expect(final.status).toBe("completed");
    for (const id of ["x", "y", "z", "w"]) {
      expect(final.steps[id]!.output).toBe(`result-of-${id}`);
      // the non-idempotent steps ran exactly once across the crash
      expect(executions.get(id)).toBe(1);
    }
    expect(final.steps.slow!.output).toBe("slow-done");
  }, 30_000);
});
