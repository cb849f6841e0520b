/**
 * The upstream fix carried in patches/@langchain+langgraph+*.patch (applied by `npm ci` through
 * patch-package): `PregelLoop.acceptPush` (every functional-API `task()` call inside a node)
 * scanned every pending write of the superstep (the scratchpad's resume lookups, the reapply of
 * saved results, `putWrites`' filter), O(n) per task and O(n²) per node execution; the scheduler
 * node ends its execution every `segmentTasks` tasks to bound it (graphs/env.ts).
 *
 * Counted, not timed: reads of `checkpointPendingWrites` elements while one node launches N
 * tasks. Without the patch the count grows with N² (≈ 4·N²/2); with it, linearly. The second test
 * checks what the index must keep: a node executed again after an interrupt gets its finished
 * tasks' saved results back and executes none of them twice.
 */
import { describe, expect, it } from "vitest";
import {
  Annotation,
  Command,
  END,
  INTERRUPT,
  interrupt,
  MemorySaver,
  START,
  StateGraph,
  task,
} from "@langchain/langgraph";

// The class the graphs below run: the ESM build of the installed package (a file URL bypasses
// the package's exports map; Node loads one module instance per URL).
const loopUrl = new URL("../node_modules/@langchain/langgraph/dist/pregel/loop.js", import.meta.url).href;
const { PregelLoop } = (await import(loopUrl)) as { PregelLoop: { prototype: Record<string, unknown> } };

/** Counts element reads of every loop's checkpointPendingWrites while `fn` runs. */
async function countPendingWriteReads<T>(fn: () => Promise<T>): Promise<{ reads: number; pushes: number; value: T }> {
  const proto = PregelLoop.prototype as { acceptPush: (...a: unknown[]) => unknown };
  const original = proto.acceptPush;
  const instrumented = new WeakSet<object>();
  let reads = 0;
  let pushes = 0;
  proto.acceptPush = function (this: Record<string, unknown>, ...args: unknown[]) {
    pushes++;
    if (!instrumented.has(this)) {
      instrumented.add(this);
      // an accessor in place of the field: every array the loop stores is read through a
      // counting proxy (one stable proxy per array, so identity checks still hold)
      let raw = this.checkpointPendingWrites as unknown[];
      const proxies = new WeakMap<unknown[], unknown[]>();
      const view = (a: unknown[]) => {
        let p = proxies.get(a);
        if (!p) {
          p = new Proxy(a, {
            get(t, k, r) {
              if (typeof k === "string" && /^\d+$/.test(k)) reads++;
              return Reflect.get(t, k, r);
            },
          });
          proxies.set(a, p);
        }
        return p;
      };
      Object.defineProperty(this, "checkpointPendingWrites", {
        configurable: true,
        get: () => view(raw),
        set: (a: unknown[]) => {
          raw = a;
        },
      });
    }
    return original.apply(this, args);
  };
  try {
    const value = await fn();
    return { reads, pushes, value };
  } finally {
    proto.acceptPush = original;
  }
}

const S = Annotation.Root({ n: Annotation<number>, done: Annotation<number> });
function chainGraph(executed: number[], interruptAfter = false) {
  return new StateGraph(S)
    .addNode("work", async (s: typeof S.State) => {
      for (let i = 0; i < s.n; i++) await task({ name: `t${i}` }, async () => (executed.push(i), i))();
      if (interruptAfter) interrupt("after the tasks");
      return { done: s.n };
    })
    .addEdge(START, "work")
    .addEdge("work", END)
    .compile({ checkpointer: new MemorySaver() });
}

describe("LangGraph task() push: pending writes scanned per task (patched)", () => {
  it("reads of pending writes grow linearly with the tasks of one node execution", async () => {
    const perTask: Record<number, number> = {};
    for (const n of [200, 800]) {
      const executed: number[] = [];
      const { reads, pushes, value } = await countPendingWriteReads(() =>
        chainGraph(executed).invoke({ n, done: 0 }, { configurable: { thread_id: `scan-${n}` } }),
      );
      expect(value.done).toBe(n);
      expect(executed).toHaveLength(n);
      expect(pushes).toBe(n); // the instrumentation saw every task()
      perTask[n] = reads / n;
    }
    // unpatched: ~2·n reads per task (n = 800: ~1,600, and 4× the n = 200 figure); patched: a few
    expect(perTask[800]).toBeLessThan(10);
    expect(perTask[800]! / Math.max(perTask[200]!, 1)).toBeLessThan(2);
  });

  it("a node executed again gets its finished tasks' results from the index, none executed twice", async () => {
    const executed: number[] = [];
    const g = chainGraph(executed, true);
    const cfg = { configurable: { thread_id: "replay" } };
    const first = await g.invoke({ n: 50, done: 0 }, cfg);
    expect((first as Record<string, unknown>)[INTERRUPT]).toBeDefined();
    expect(executed).toHaveLength(50);
    const { reads, value } = await countPendingWriteReads(() => g.invoke(new Command({ resume: "go" }), cfg));
    expect(value.done).toBe(50);
    expect(executed).toHaveLength(50); // every task returned its saved result
    expect(reads).toBeLessThan(50 * 10);
  });
});
