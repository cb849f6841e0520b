/**
 * The surfaces that expose the kernel as is: the Studio graph registered in langgraph.json and
 * the skill manifest.
 */
import { readFileSync } from "node:fs";
import { MemorySaver } from "@langchain/langgraph";
import { describe, expect, test } from "vitest";
import { graph } from "../graphs/toolchain.js";
import { coreSkills } from "../skills/core/index.js";
import { SkillRegistry } from "../src/skills/registry.js";

describe("langgraph.json graph", () => {
  test("langgraph.json points at the exported graph, which runs a plan with the built-in skills", async () => {
    const cfg = JSON.parse(readFileSync("langgraph.json", "utf8"));
    expect(cfg.graphs.toolchain).toBe("./graphs/toolchain.ts:graph");
    expect(Object.keys(graph.nodes).sort()).toEqual([
      "__start__",
      "approval",
      "compensation",
      "planner",
      "rollback_approval",
      "scheduler",
    ]);
    // Studio's server injects its own checkpointer; do the same here
    const checkpointer = new MemorySaver();
    graph.checkpointer = checkpointer;
    const config = { configurable: { thread_id: "studio-1" } };
    // b fails its first attempt and succeeds on the second: two attempts, two tasks
    const input = {
      runId: "studio-1",
      plan: {
        steps: [
          { stepId: "a", skillName: "core.pass", arguments: { value: 2 } },
          {
            stepId: "b",
            skillName: "core.fail",
            dependsOn: ["a"],
            arguments: { untilAttempt: 2, value: { $ref: "steps.a" } },
            retry: { maxAttempts: 2, backoff: { kind: "fixed", initialMs: 1 } },
          },
        ],
      } as never,
      context: {},
    };
    const started: string[] = [];
    const finished: [string, unknown][] = [];
    for await (const [mode, chunk] of await graph.stream(input, { ...config, streamMode: ["tasks", "values"] })) {
      if (mode !== "tasks") continue;
      const t = chunk as { name: string; input?: unknown; result?: unknown };
      if ("input" in t) started.push(t.name);
      else finished.push([t.name, t.result]);
    }
    const out = (await graph.getState(config)).values;
    expect(out.status).toBe("completed");
    expect(out.steps.b!.output).toBe(2);
    // Studio's task list: the nodes, and under the scheduler one task per step attempt; a given
    // plan skips the planner, and the scheduler's superstep ends the run (no node of its own)
    expect(started).toEqual(["scheduler", "step.a#a1", "step.b#a1", "step.b#a2"]);
    expect(finished.map(([n]) => n)).toEqual(["step.a#a1", "step.b#a1", "step.b#a2", "scheduler"]);
    // each attempt's result is saved in the scheduler node's checkpoint (durable per attempt)
    const saved: unknown[] = [];
    for await (const c of checkpointer.list(config))
      for (const w of c.pendingWrites ?? []) if (w[1] === "__return__") saved.push(w[2]);
    // (the checkpointer lists writes in no particular order)
    expect(saved).toHaveLength(3);
    expect(saved).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ ok: true, output: 2 }),
        expect.objectContaining({ ok: false, error: expect.objectContaining({ code: "EXECUTION_FAILED" }) }),
      ]),
    );
    expect(saved.filter((x) => (x as { ok: boolean }).ok)).toHaveLength(2);
  });
});

describe("skill manifest", () => {
  test("JSON view with schemas and side-effect metadata", () => {
    const m = new SkillRegistry(coreSkills).manifest();
    const wait = m.find((s) => s.name === "core.wait")!;
    expect(wait).toMatchObject({
      sideEffects: "none",
      idempotent: true,
      parallelSafe: true,
      requiresConfirmation: false,
      compensable: false,
      previewable: false,
    });
    expect(wait.inputSchema).toMatchObject({
      type: "object",
      properties: { ms: { type: "integer" } },
      required: ["ms"],
    });
    expect(new SkillRegistry(coreSkills).manifest((n) => n !== "core.fail").map((s) => s.name)).toEqual([
      "core.pass",
      "core.wait",
    ]);
  });

  test("registration errors name the problem", () => {
    const r = new SkillRegistry(coreSkills);
    expect(() => r.register(coreSkills[0]!)).toThrow('Skill "core.pass" is already registered');
    expect(() => r.register({ ...coreSkills[0]!, name: "nopack" })).toThrow(
      'Expected skill name like "pack.name", got "nopack"',
    );
  });
});
