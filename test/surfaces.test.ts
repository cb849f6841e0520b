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
    expect(Object.keys(graph.nodes).sort()).toEqual(["__start__", "approval", "compensation", "observer", "planner", "rollback_approval", "scheduler"]);
    // Studio's server injects its own checkpointer; do the same here
    graph.checkpointer = new MemorySaver();
    const out = await graph.invoke(
      {
        runId: "studio-1",
        plan: { steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: 2 } }, { stepId: "b", skillName: "core.pass", dependsOn: ["a"], arguments: { value: { $ref: "steps.a" } } }] } as never,
        context: {},
        createdAt: new Date().toISOString(),
      },
      { configurable: { thread_id: "studio-1" } },
    );
    expect(out.status).toBe("completed");
    expect(out.steps.b!.output).toBe(2);
    // each step attempt is a task under the scheduler node
    const history = [];
    for await (const s of graph.getStateHistory({ configurable: { thread_id: "studio-1" } })) history.push(s);
    const schedulerStep = history.find((h) => h.tasks.some((t) => t.name === "scheduler"));
    expect(schedulerStep).toBeDefined();
  });
});

describe("skill manifest", () => {
  test("JSON view with schemas and side-effect metadata", () => {
    const m = new SkillRegistry(coreSkills).manifest();
    const wait = m.find((s) => s.name === "core.wait")!;
    expect(wait).toMatchObject({ sideEffects: "none", idempotent: true, parallelSafe: true, requiresConfirmation: false, compensable: false, previewable: false });
    expect(wait.inputSchema).toMatchObject({ type: "object", properties: { ms: { type: "integer" } }, required: ["ms"] });
    expect(new SkillRegistry(coreSkills).manifest((n) => n !== "core.fail").map((s) => s.name)).toEqual(["core.pass", "core.wait"]);
  });

  test("registration errors name the problem", () => {
    const r = new SkillRegistry(coreSkills);
    expect(() => r.register(coreSkills[0]!)).toThrow('Skill "core.pass" is already registered');
    expect(() => r.register({ ...coreSkills[0]!, name: "nopack" })).toThrow('Expected skill name like "pack.name", got "nopack"');
  });
});
