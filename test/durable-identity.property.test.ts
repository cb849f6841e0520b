/**
 * Durable task identity (graphs/durable-task.ts): two distinct pieces of work can never share a
 * LangGraph task id, so replay can never hand one task's saved result to another (issue: a
 * reconcile of attempt 2 reusing attempt 1's saved `applied: false`; a decision of round 1
 * reusing round 0's).
 */
import { fc, test as fcTest } from "@fast-check/vitest";
import { Annotation, MemorySaver, StateGraph, START, END, interrupt, Command } from "@langchain/langgraph";
import { describe, expect, test } from "vitest";
import { callDurable, taskKey, type TaskIdentity, type TaskKind } from "../graphs/durable-task.js";

const KINDS: TaskKind[] = [
  "preview",
  "preview_fallback",
  "step",
  "fallback",
  "reconcile",
  "reconcile_fallback",
  "decision",
  "compensate",
];
const stepId = fc.stringMatching(/^[A-Za-z][A-Za-z0-9_-]{0,10}$/);
const identity: fc.Arbitrary<TaskIdentity> = fc.record(
  {
    kind: fc.constantFrom(...KINDS),
    stepId,
    stepIndex: fc.nat(10_000),
    attempt: fc.option(fc.integer({ min: 1, max: 10_000 }), { nil: undefined }),
    round: fc.option(fc.nat(10_000), { nil: undefined }),
  },
  { requiredKeys: ["kind", "stepId", "stepIndex"] },
);
const norm = (t: TaskIdentity) => JSON.stringify([t.kind, t.stepId, t.stepIndex, t.attempt ?? null, t.round ?? null]);

describe("durable task identity", () => {
  fcTest.prop([identity, identity], { numRuns: 5_000 })("distinct identities never share (name, counter)", (a, b) => {
    const [ka, kb] = [taskKey(a), taskKey(b)];
    if (ka.name === kb.name && ka.counter === kb.counter) expect(norm(a)).toBe(norm(b));
  });

  fcTest.prop([fc.uniqueArray(identity, { minLength: 1, maxLength: 30, selector: norm })], { numRuns: 25 })(
    "in a real graph, replay returns each task its own result and runs none twice",
    async (ids) => {
      const runs = new Map<string, number>();
      const State = Annotation.Root({ out: Annotation<string[]>({ reducer: (_a, b) => b, default: () => [] }) });
      const graph = new StateGraph(State)
        .addNode("n", async (_s, config) => {
          // launch in a shuffled order each execution: identity, not call order, must match results
          const order = [...ids].sort(() => Math.random() - 0.5);
          const got = await Promise.all(
            order.map((t) =>
              callDurable(config, t, async () => {
                runs.set(norm(t), (runs.get(norm(t)) ?? 0) + 1);
                return norm(t);
              }).then((v) => [norm(t), v] as const),
            ),
          );
          for (const [want, v] of got) expect(v).toBe(want);
          interrupt("pause"); // the node re-executes on resume: every task replays
          return { out: got.map(([, v]) => v) };
        })
        .addEdge(START, "n")
        .addEdge("n", END)
        .compile({ checkpointer: new MemorySaver() });
      const config = { configurable: { thread_id: `t-${Math.random()}` } };
      await graph.invoke({}, config);
      const final = await graph.invoke(new Command({ resume: "go" }), config);
      expect(final.out).toHaveLength(ids.length);
      for (const t of ids) expect(runs.get(norm(t))).toBe(1);
    },
  );

  test("names spell out what the task is", () => {
    expect(taskKey({ kind: "reconcile", stepId: "write", stepIndex: 3, attempt: 2 })).toEqual({
      name: "reconcile.write#a2",
      counter: 3,
    });
    expect(taskKey({ kind: "decision", stepId: "x", stepIndex: 0, round: 1 }).name).toBe("decision.x#r1");
    expect(taskKey({ kind: "compensate", stepId: "x", stepIndex: 0, attempt: 1, round: 2 }).name).toBe(
      "compensate.x#a1#r2",
    );
  });
});
