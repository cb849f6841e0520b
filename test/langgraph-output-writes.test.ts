/**
 * The second upstream fix carried in patches/@langchain+langgraph+*.patch: `PregelLoop._outputWrites`
 * (every finished task, each `task()` inside a node included) built the "updates" payload
 * (`mapOutputUpdates` over the graph's output keys) and the "tasks" payload for every task, then
 * `_emit` dropped both unless a caller streamed those modes. The patch builds them only when
 * streamed, as the same file already does for "checkpoints" and the "tasks" of a push.
 *
 * Counted, not timed: reads of the loop's `outputKeys` and `streamKeys` (what the two payloads are
 * mapped over) inside `_outputWrites`. Fails when the patch stops applying or upstream changes the
 * method; the second case checks that a caller who streams the modes still gets both payloads.
 */
import { expect, it } from "vitest";
import { Annotation, MemorySaver, START, END, StateGraph, task } from "@langchain/langgraph";

// the ESM build of the installed package, as the graphs below run it (see langgraph-push-scan.test.ts)
const loopUrl = new URL("../node_modules/@langchain/langgraph/dist/pregel/loop.js", import.meta.url).href;
const { PregelLoop } = (await import(loopUrl)) as { PregelLoop: { prototype: Record<string, unknown> } };

/** Reads of outputKeys / streamKeys inside _outputWrites while `fn` runs, and its calls. */
async function countPayloadReads(fn: () => Promise<void>) {
  const proto = PregelLoop.prototype as { _outputWrites: (...a: unknown[]) => unknown };
  const original = proto._outputWrites;
  const n = { calls: 0, outputKeys: 0, streamKeys: 0 };
  proto._outputWrites = function (this: Record<string, unknown>, ...args: unknown[]) {
    n.calls++;
    const saved = { outputKeys: this.outputKeys, streamKeys: this.streamKeys };
    for (const k of ["outputKeys", "streamKeys"] as const)
      Object.defineProperty(this, k, {
        configurable: true,
        get: () => (n[k]++, saved[k]),
      });
    try {
      return original.apply(this, args);
    } finally {
      for (const k of ["outputKeys", "streamKeys"] as const)
        Object.defineProperty(this, k, { configurable: true, writable: true, enumerable: true, value: saved[k] });
    }
  };
  try {
    await fn();
  } finally {
    proto._outputWrites = original;
  }
  return n;
}

const S = Annotation.Root({ n: Annotation<number> });
const graph = new StateGraph(S)
  .addNode("work", async (s: typeof S.State) => {
    for (let i = 0; i < s.n; i++) await task({ name: `t${i}` }, async () => i)();
    return { n: s.n };
  })
  .addEdge(START, "work")
  .addEdge("work", END)
  .compile({ checkpointer: new MemorySaver() });

it("a stream without 'updates' or 'tasks' builds neither payload for its 20 finished tasks", async () => {
  const n = await countPayloadReads(async () => {
    const stream = await graph.stream(
      { n: 20 },
      { configurable: { thread_id: "custom" }, streamMode: ["custom", "values"] },
    );
    for await (const chunk of stream) void chunk;
  });
  expect(n.calls).toBeGreaterThanOrEqual(21); // 20 tasks and the node
  expect(n).toMatchObject({ outputKeys: 0, streamKeys: 0 });
});

it("a stream of 'updates' and 'tasks' still gets both payloads for every task", async () => {
  const modes = new Map<string, number>();
  const n = await countPayloadReads(async () => {
    const stream = await graph.stream(
      { n: 20 },
      { configurable: { thread_id: "both" }, streamMode: ["updates", "tasks"] },
    );
    for await (const [mode] of stream as AsyncIterable<[string, unknown]>) modes.set(mode, (modes.get(mode) ?? 0) + 1);
  });
  expect(n.outputKeys).toBeGreaterThanOrEqual(21);
  expect(n.streamKeys).toBeGreaterThanOrEqual(21);
  expect(modes.get("updates")).toBeGreaterThanOrEqual(21);
  expect(modes.get("tasks")).toBeGreaterThanOrEqual(21);
});
