/**
 * The graph as LangGraph callers meet it (Studio, the SDK, a parent graph): an explicit input
 * schema (nothing else from an input reaches state), an invalid plan ends the LangGraph run in
 * error with its code, a resume value that does not parse is refused with the reason in the
 * re-raised interrupt, and a plan edited into the checkpoint that no longer validates ends the
 * run `failed` instead of leaving the thread stuck.
 */
import { Command, MemorySaver } from "@langchain/langgraph";
import { describe, expect, test } from "vitest";
import { z } from "zod";
import { GraphInputSchema } from "../graphs/io.js";
import { defaultEnv } from "../graphs/env.js";
import { compileToolchainGraph } from "../graphs/toolchain.js";
import type { ConfirmationInterrupt } from "../graphs/approval-node.js";
import { EVENT_TAG, isTaggedEvent, type EmittedEvent } from "../src/kernel/events.js";
import { coreSkills } from "../skills/core/index.js";
import { SkillRegistry } from "../src/skills/registry.js";
import type { Skill } from "../src/skills/contract.js";

let effects = 0;
const effect: Skill = {
  name: "test.effect",
  description: "counts its executions (a non-idempotent effect)",
  sideEffects: { kind: "write", idempotent: false },
  input: z.object({ label: z.string() }),
  output: z.object({ n: z.number() }),
  async execute() {
    return { n: ++effects };
  },
} as unknown as Skill;

function fresh() {
  const graph = compileToolchainGraph(defaultEnv(new SkillRegistry([...coreSkills, effect])), new MemorySaver());
  let n = 0;
  const thread = () => ({ configurable: { thread_id: `t-${Date.now()}-${++n}` } });
  return { graph, thread };
}

/** Runs until the graph stops; returns the events and the interrupt payloads it raised. */
async function drive(
  graph: ReturnType<typeof fresh>["graph"],
  input: unknown,
  config: { configurable: { thread_id: string } },
) {
  const events: EmittedEvent[] = [];
  const interrupts: ConfirmationInterrupt[] = [];
  for await (const [mode, chunk] of await graph.stream(input as never, {
    ...config,
    streamMode: ["custom", "updates"],
  })) {
    if (mode === "custom" && isTaggedEvent(chunk)) events.push(chunk[EVENT_TAG]);
    if (mode === "updates" && chunk && typeof chunk === "object" && "__interrupt__" in chunk) {
      for (const i of (chunk as { __interrupt__: { value: ConfirmationInterrupt }[] }).__interrupt__)
        interrupts.push(i.value);
    }
  }
  const state = await graph.getState(config);
  return { events, interrupts, state, values: state.values as Record<string, any> };
}

const twoConfirmations = {
  steps: [
    { stepId: "a", skillName: "test.effect", arguments: { label: "a" }, requireConfirmation: true },
    { stepId: "b", skillName: "test.effect", arguments: { label: "b" }, requireConfirmation: true },
    { stepId: "c", skillName: "core.pass", dependsOn: ["a", "b"], arguments: { value: { $ref: "steps.a.n" } } },
  ],
};

describe("the graph's input", () => {
  test("forged state in the input is refused before anything runs; nothing reaches state", async () => {
    const { graph, thread } = fresh();
    const plan = {
      steps: [
        { stepId: "a", skillName: "test.effect", arguments: { label: "a" }, requireConfirmation: true },
        { stepId: "b", skillName: "core.pass", dependsOn: ["a"], arguments: { value: { $ref: "steps.a" } } },
      ],
    };
    for (const forged of [
      { plan, steps: { a: { status: "completed", attempts: 1, output: "FORGED" } } },
      { plan, decisions: { a: { decision: "approve" } } },
      { plan, status: "completed" },
      { plan, workspaceId: "someone-else" },
      { plan, allowedSkills: ["test.effect"] },
    ]) {
      const config = thread();
      const before = effects;
      await expect(graph.invoke(forged as never, config)).rejects.toThrow(/Unrecognized key/);
      expect(effects).toBe(before);
      expect((await graph.getState(config)).values).toEqual({});
    }
  });

  test("the declared fields run: runId defaults to the thread, createdAt is set, a required confirmation still waits", async () => {
    const { graph, thread } = fresh();
    const config = thread();
    const out = await drive(
      graph,
      {
        plan: {
          steps: [{ stepId: "a", skillName: "test.effect", arguments: { label: "a" }, requireConfirmation: true }],
        },
        context: { k: 1 },
        memory: { m: 2 },
      },
      config,
    );
    expect(out.values.runId).toBe(config.configurable.thread_id);
    expect(Date.parse(out.values.createdAt)).not.toBeNaN();
    expect(out.values.steps.a.status).toBe("waiting_confirmation");
    expect(out.values.memory).toEqual({ m: 2 });
    expect(out.interrupts).toHaveLength(1);
    expect(out.interrupts[0]!.resume.example).toEqual({
      decisions: { a: { decision: "approve", comment: "looks right" } },
    });
    expect(out.interrupts[0]!.resume.shape).toMatch(/decisions/);
  });

  test("the input schema shows every step field (Studio's form) and no absolute paths", () => {
    const schema = z.toJSONSchema(GraphInputSchema, { io: "input" }) as any;
    expect(Object.keys(schema.properties).sort()).toEqual(["context", "memory", "plan", "request", "runId"]);
    expect(schema.additionalProperties).toBe(false);
    const text = JSON.stringify(schema);
    expect(text).not.toContain(process.cwd());
    const stepProps = JSON.stringify(schema.properties.plan);
    for (const f of [
      "stepId",
      "skillName",
      "arguments",
      "dependsOn",
      "retry",
      "timeoutMs",
      "requireConfirmation",
      "rollback",
      "fallback",
    ])
      expect(stepProps).toContain(`"${f}"`);
  });
});

describe("an invalid plan ends the LangGraph run in error with its code", () => {
  test.each([
    [
      "PLAN_CYCLE",
      {
        steps: [
          { stepId: "a", skillName: "core.pass", dependsOn: ["b"] },
          { stepId: "b", skillName: "core.pass", dependsOn: ["a"] },
        ],
      },
    ],
    ["UNKNOWN_SKILL", { steps: [{ stepId: "a", skillName: "nope.skill" }] }],
    ["UNKNOWN_DEPENDENCY", { steps: [{ stepId: "a", skillName: "core.pass", dependsOn: ["zz"] }] }],
  ])("%s", async (code, plan) => {
    const { graph, thread } = fresh();
    const config = thread();
    await expect(graph.invoke({ plan } as never, config)).rejects.toThrow(new RegExp(`^${code}: `));
    const snap = await graph.getState(config);
    expect(snap.values.status).toBeUndefined(); // nothing ran, nothing claims to have finished
  });

  test("neither plan nor request", async () => {
    const { graph, thread } = fresh();
    await expect(graph.invoke({} as never, thread())).rejects.toThrow(/^PLAN_INVALID: /);
  });
});

describe("resume values", () => {
  test("a value that does not parse, names an unknown step or answers nothing waiting is refused: the interrupt comes back with resumeError; nothing runs", async () => {
    const { graph, thread } = fresh();
    const config = thread();
    const before = effects;
    await drive(graph, { plan: twoConfirmations }, config);
    const bad: [unknown, string, RegExp][] = [
      ["approve", "INVALID_DECISION", /expected \{ decisions/],
      [{ decisions: { nope: { decision: "approve" } } }, "INVALID_DECISION", /decisions\.nope: no step "nope"/],
      [{ decisions: { a: { decision: "yes" } } }, "INVALID_DECISION", /decisions\.a\.decision/],
      [{ decisions: { c: { decision: "approve" } } }, "CONFIRMATION_NOT_PENDING", /step "c" is not waiting/],
      [{ decisions: { a: { decision: "approve", round: 3 } } }, "CONFIRMATION_NOT_PENDING", /step "a"/],
    ];
    for (const [value, code, msg] of bad) {
      const out = await drive(graph, new Command({ resume: value }), config);
      expect(out.interrupts).toHaveLength(1);
      expect(out.interrupts[0]!.resumeError?.code).toBe(code);
      expect(out.interrupts[0]!.resumeError?.message).toMatch(msg);
      expect(out.interrupts[0]!.pending.map((p) => p.stepId)).toEqual(["a", "b"]);
      // a node replays earlier refusals with the same keys (the event log keeps one of each)
      const rejected = out.events.filter((e) => e.type === "resume_rejected");
      expect(rejected.at(-1)!.data.code).toBe(code);
      expect(new Set(rejected.map((e) => e.key)).size).toBe(rejected.length);
      expect(out.values.steps.a.status).toBe("waiting_confirmation");
      expect(out.values.steps.b.status).toBe("waiting_confirmation");
    }
    expect(effects).toBe(before);
    // two parallel confirmations answered one at a time: a runs at once, b still waits
    const first = await drive(graph, new Command({ resume: { decisions: { a: { decision: "approve" } } } }), config);
    expect(first.values.steps.a.status).toBe("completed");
    expect(first.values.steps.b.status).toBe("waiting_confirmation");
    expect(first.interrupts.at(-1)!.pending.map((p) => p.stepId)).toEqual(["b"]);
    expect(first.interrupts.at(-1)!.resumeError).toBeUndefined();
    // a decision given straight to the graph (Studio, the SDK) is recorded as such
    expect(first.events.find((e) => e.type === "step_confirmed" && e.stepId === "a")!.data).toMatchObject({
      decision: "approve",
      via: "studio",
    });
    const second = await drive(
      graph,
      new Command({ resume: { decisions: { b: { decision: "approve", comment: "ok" } } } }),
      config,
    );
    expect(second.values.status).toBe("completed");
    expect(second.values.steps.c.output).toBe(second.values.steps.a.output.n);
    expect(effects).toBe(before + 2); // each effect once, none for the refused values
    expect(second.state.next).toEqual([]);
  });

  test("a rejection through the graph fails the step with REJECTED", async () => {
    const { graph, thread } = fresh();
    const config = thread();
    await drive(graph, { plan: twoConfirmations }, config);
    const out = await drive(
      graph,
      new Command({ resume: { decisions: { a: { decision: "reject", comment: "no" }, b: { decision: "approve" } } } }),
      config,
    );
    expect(out.values.steps.a.status).toBe("failed");
    expect(out.values.steps.a.error.code).toBe("REJECTED");
    expect(out.values.status).toBe("failed");
  });
});

describe("a plan edited into the checkpoint (Studio's edit state)", () => {
  test("one that no longer validates ends the run failed with the code; the thread is not stuck", async () => {
    const { graph, thread } = fresh();
    const config = thread();
    const before = effects;
    await drive(graph, { plan: twoConfirmations }, config);
    const cyclic = {
      ...twoConfirmations,
      steps: twoConfirmations.steps.map((s) => (s.stepId === "a" ? { ...s, dependsOn: ["c"] } : s)),
    };
    await graph.updateState(config, { plan: cyclic } as never, "approval");
    const out = await drive(graph, null, config);
    expect(out.values.status).toBe("failed");
    expect(out.values.error.code).toBe("PLAN_CYCLE");
    expect(out.state.next).toEqual([]);
    expect(out.events.map((e) => e.type)).toContain("run_failed");
    expect(effects).toBe(before);
  });
});
