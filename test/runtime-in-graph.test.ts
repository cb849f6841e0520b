/**
 * The runtime used as a library from inside another LangGraph graph's node (an agent's tool, a
 * workflow step): the run's graph must not inherit the caller's context (checkpoint namespace,
 * callbacks, stream), or its events land in the caller's stream and its checkpoints in the
 * caller's thread.
 */
import { Annotation, MemorySaver, StateGraph, START, END } from "@langchain/langgraph";
import { describe, expect, test } from "vitest";
import { createRuntime } from "../src/index.js";
import { isTaggedEvent } from "../src/kernel/events.js";

describe("the runtime called from inside a LangGraph node", () => {
  test("its run is its own: completes, confirms, and nothing of it reaches the caller's stream or thread", async () => {
    const runtime = createRuntime();
    const State = Annotation.Root({ runId: Annotation<string>, status: Annotation<string> });
    const outerSaver = new MemorySaver();
    const outer = new StateGraph(State)
      .addNode("start_chain", async () => {
        const view = await runtime.run({
          steps: [
            { stepId: "a", skillName: "core.pass", arguments: { value: 1 }, requireConfirmation: true },
            { stepId: "b", skillName: "core.pass", dependsOn: ["a"], arguments: { value: { $ref: "steps.a" } } },
          ],
        }).result;
        return { runId: view.runId, status: view.status };
      })
      .addNode("confirm_chain", async (s: typeof State.State) => {
        const h = await runtime.confirm(s.runId, { stepId: "a", decision: "approve" });
        return { status: (await h.result).status };
      })
      .addEdge(START, "start_chain")
      .addEdge("start_chain", "confirm_chain")
      .addEdge("confirm_chain", END)
      .compile({ checkpointer: outerSaver });
    const config = { configurable: { thread_id: "outer-1" } };
    const custom: unknown[] = [];
    for await (const [mode, chunk] of await outer.stream({}, { ...config, streamMode: ["custom", "values"] }))
      if (mode === "custom") custom.push(chunk);
    const final = (await outer.getState(config)).values;
    expect(final.status).toBe("completed");
    expect((await runtime.getRun(final.runId)).steps.map((s) => s.status)).toEqual(["completed", "completed"]);
    expect(custom.filter(isTaggedEvent)).toEqual([]);
    // the caller's thread holds only its own checkpoints (no namespaces of the run's graph)
    const namespaces = new Set<string>();
    for await (const c of outerSaver.list({ configurable: { thread_id: "outer-1" } }))
      namespaces.add(String(c.config.configurable?.checkpoint_ns ?? ""));
    expect([...namespaces]).toEqual([""]);
    // and the run's own thread has its checkpoints
    expect((await runtime.events(final.runId)).map((e) => e.type)).toContain("run_completed");
  }, 60_000);
});
