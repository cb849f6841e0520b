/**
 * The planner against a scripted OpenAI-compatible server on loopback, through the real
 * ChatOpenAI client: valid plans (tool call and json_schema answers), the repair round, the
 * fallback for every way the model can fail, clamping, the allowlist, and planning inside the
 * graph's planner node (events, the run's planner record).
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { qtableSkills, MemoryTableStore } from "../skills/qtable/index.js";
import { Planner } from "../src/planner/index.js";
import { createRuntime } from "../src/runtime/runtime.js";
import { coreSkills } from "../skills/core/index.js";
import { SkillRegistry } from "../src/skills/registry.js";
import { startMockOpenAi, type MockOpenAi } from "./helpers/openai-mock.js";
import { EffectLedger, effectSkill } from "./helpers/skills.js";
import { modelTaskSplitter } from "../src/planner/task-splitter.js";

const REQUEST =
  "Plan an approval system, estimate the effort, build a timeline and put the tasks into the current table";

const twoSteps = {
  goal: "pass a value along",
  steps: [
    { stepId: "a", skillName: "core.pass", arguments: { value: { n: 1 } } },
    { stepId: "b", skillName: "core.pass", dependsOn: ["a"], arguments: { value: { $ref: "steps.a.n" } } },
  ],
};
const cyclic = {
  steps: [
    { stepId: "a", skillName: "core.pass", dependsOn: ["b"], arguments: { value: 1 } },
    { stepId: "b", skillName: "core.pass", dependsOn: ["a"], arguments: { value: 2 } },
  ],
};

describe("planner (scripted OpenAI-compatible server, real ChatOpenAI)", () => {
  let mock: MockOpenAi;
  let tables: MemoryTableStore;
  let registry: SkillRegistry;
  let tableId: string;
  const ledger = new EffectLedger();
  const context = () => ({ table: { id: tableId }, startDate: "2026-12-07" });
  const planner = (over: Record<string, unknown> = {}) =>
    new Planner({ registry, config: { model: "gpt-test", baseURL: mock.baseURL, timeoutMs: 5_000, ...over } });

  beforeAll(async () => {
    mock = await startMockOpenAi();
    tables = new MemoryTableStore();
    tableId = (await tables.ensureWorkspace("default")).id;
    registry = new SkillRegistry([...coreSkills, ...qtableSkills({ store: tables }), effectSkill(ledger)]);
  });
  afterAll(() => mock?.close());

  test("a valid plan (function calling): the model's plan, its token usage; the prompt carries the request, the table and its schema, and the manifest", async () => {
    const before = mock.requests.length;
    mock.script({ toolCall: twoSteps });
    const out = await planner().plan({ request: "pass one along", context: context() });
    expect(out.planner).toEqual({ kind: "llm", model: "gpt-test" });
    expect(out.plan.steps.map((s) => s.stepId)).toEqual(["a", "b"]);
    expect(out.warnings).toEqual([]);
    expect(out.repairRounds).toBe(0);
    expect(out.usage).toEqual({ inputTokens: 812, outputTokens: 164, totalTokens: 976 });
    const req = mock.requests[before]!;
    expect(mock.requests.length - before).toBe(1);
    expect(req.model).toBe("gpt-test");
    // structured output bound to the ToolChainPlan schema as a forced tool call
    expect(req.tools[0].function.name).toBe("ToolChainPlan");
    expect(req.tools[0].function.parameters.properties.steps.type).toBe("array");
    expect(req.tool_choice).toEqual({ type: "function", function: { name: "ToolChainPlan" } });
    const user = req.messages.find((m: { role: string }) => m.role === "user").content as string;
    expect(user).toContain("pass one along");
    expect(user).toContain(`"id":"${tableId}"`);
    expect(user).toContain('"name":"estimateDays"'); // the table's schema, read with qtable.table.schema.describe
    expect(user).toContain('"name":"qtable.task.records.create"');
    expect(user).toContain('"sideEffects":"write"');
  });

  test("a valid plan (json_schema response format)", async () => {
    const before = mock.requests.length;
    mock.script({ content: twoSteps });
    const out = await planner({ method: "jsonSchema" }).plan({ request: "pass one along" });
    expect(out.planner.kind).toBe("llm");
    expect(out.plan.steps).toHaveLength(2);
    expect(mock.requests[before]!.response_format.type).toBe("json_schema");
    expect(mock.requests[before]!.response_format.json_schema.name).toBe("ToolChainPlan");
  });

  test("a plan with a cycle goes back to the model once with the exact issue; the repaired plan is used", async () => {
    const before = mock.requests.length;
    mock.script({ toolCall: cyclic }, { toolCall: twoSteps });
    const out = await planner().plan({ request: "pass one along" });
    expect(out.planner).toEqual({ kind: "llm", model: "gpt-test" });
    expect(out.repairRounds).toBe(1);
    expect(out.usage?.totalTokens).toBe(2 * 976);
    expect(out.warnings).toEqual([expect.objectContaining({ code: "repaired" })]);
    expect(mock.requests.length - before).toBe(2);
    const repair = mock.requests[before + 1]!.messages.at(-1).content as string;
    expect(repair).toContain("PLAN_CYCLE: plan has a cycle: a -> b -> a");
  });

  test("a plan that stays broken after the repair round: the fallback planner writes the plan, the reason is recorded", async () => {
    mock.script({ toolCall: cyclic }, { toolCall: { steps: [{ stepId: "x", skillName: "no.such", arguments: {} }] } });
    const out = await planner().plan({ request: REQUEST, context: context() });
    expect(out.planner).toMatchObject({ kind: "fallback", model: "gpt-test", fallbackReason: "validation_failed" });
    expect(out.planner.fallbackDetail).toContain('UNKNOWN_SKILL: step "x": unknown skill "no.such"');
    expect(out.repairRounds).toBe(1);
    expect(out.plan.steps.map((s) => [s.stepId, s.skillName, s.dependsOn])).toEqual([
      ["split", "qtable.task.split", []],
      ["estimate", "qtable.task.estimate", ["split"]],
      ["schema", "qtable.table.schema.describe", ["split"]],
      ["gantt", "qtable.gantt.generate", ["estimate"]],
      ["create", "qtable.task.records.create", ["gantt", "schema"]],
    ]);
    expect(out.plan.steps.at(-1)!.requireConfirmation).toBe(true);
  });

  test("a model that times out, answers 500, is unreachable or answers garbage: fallback, with the reason", async () => {
    mock.script({ hang: true });
    const slow = await planner({ timeoutMs: 300 }).plan({ request: REQUEST, context: context() });
    expect(slow.planner).toMatchObject({
      kind: "fallback",
      fallbackReason: "timeout",
      fallbackDetail: "the model did not answer within 300 ms",
    });

    mock.script({ status: 500, message: "model crashed" });
    const failed = await planner().plan({ request: REQUEST, context: context() });
    expect(failed.planner).toMatchObject({ kind: "fallback", fallbackReason: "http_error" });
    expect(failed.planner.fallbackDetail).toContain("HTTP 500");

    const down = await new Planner({
      registry,
      config: { model: "gpt-test", baseURL: "http://127.0.0.1:9/v1", timeoutMs: 5_000 },
    }).plan({ request: REQUEST, context: context() });
    expect(down.planner).toMatchObject({ kind: "fallback", fallbackReason: "unreachable" });

    mock.script({ toolCall: "{not json" });
    const garbage = await planner().plan({ request: REQUEST, context: context() });
    expect(garbage.planner).toMatchObject({ kind: "fallback", fallbackReason: "invalid_output" });

    mock.script({ content: "Sure! Here is a plan for you." });
    const prose = await planner({ method: "jsonSchema" }).plan({ request: REQUEST, context: context() });
    expect(prose.planner).toMatchObject({ kind: "fallback", fallbackReason: "invalid_output" });
    for (const o of [slow, failed, down, garbage, prose]) expect(o.plan.steps).toHaveLength(5);
  });

  test("no model configured: the fallback planner, reason not_configured; a request it cannot plan is PLANNING_FAILED naming what it understood", async () => {
    const p = new Planner({ registry, config: {} });
    const out = await p.plan({ request: REQUEST, context: context() });
    expect(out.planner).toEqual({
      kind: "fallback",
      fallbackReason: "not_configured",
      fallbackDetail: "no model is configured (TOOLCHAIN_PLANNER_MODEL)",
    });
    expect(out.understood).toEqual({
      goal: "an approval system",
      intents: ["plan", "estimate", "timeline", "records"],
      table: tableId,
    });

    const err = await p.plan({ request: "What's the weather in Lisbon?", context: context() }).catch((e) => e);
    expect(err.code).toBe("PLANNING_FAILED");
    expect(err.message).toContain(
      'understood the goal "What\'s the weather in Lisbon" with no planning, estimation or timeline intent',
    );
    expect(err.details.understood).toEqual({ goal: "What's the weather in Lisbon", intents: [], table: tableId });
    expect(err.details.planner).toMatchObject({ kind: "fallback", fallbackReason: "not_configured" });
  });

  test("without a target table the fallback stops at the timeline and says so", async () => {
    const out = await new Planner({ registry }).plan({
      request: "Plan a website relaunch and build a timeline",
      context: {},
    });
    expect(out.plan.steps.map((s) => s.stepId)).toEqual(["split", "estimate", "gantt"]);
    expect(out.warnings).toEqual([expect.objectContaining({ code: "no_target_table" })]);
  });

  test("execution semantics are clamped to the skills' metadata, one warning each", async () => {
    mock.script({
      toolCall: {
        steps: [
          {
            stepId: "send",
            skillName: "test.effect",
            arguments: { label: "mail" },
            retry: { maxAttempts: 5 },
            rollback: { kind: "none" },
            acceptNoCompensation: true,
          },
          {
            stepId: "write",
            skillName: "qtable.task.records.create",
            arguments: { tableId: { $ref: "context.table.id" }, records: [{ title: "x" }] },
            requireConfirmation: false,
            timeoutMs: 86_400_000,
          },
          { stepId: "calc", skillName: "core.pass", arguments: { value: 1 }, retry: { maxAttempts: 10 } },
        ],
      },
    });
    const out = await planner().plan({ request: "send a mail and write a row", context: context() });
    expect(out.planner.kind).toBe("llm");
    const byId = Object.fromEntries(out.plan.steps.map((s) => [s.stepId, s]));
    expect(byId.send!.retry).toMatchObject({ maxAttempts: 1 });
    expect(byId.send!.rollback).toBeUndefined();
    expect(byId.send!.acceptNoCompensation).toBeUndefined();
    expect(byId.write!.requireConfirmation).toBeUndefined(); // the skill's own requirement applies
    expect(byId.write!.timeoutMs).toBe(300_000);
    expect(byId.calc!.retry).toMatchObject({ maxAttempts: 3 });
    expect(out.warnings.map((w) => [w.code, w.stepId])).toEqual([
      ["retry_not_allowed", "send"],
      ["rollback_ignored", "send"],
      ["accept_no_compensation_ignored", "send"],
      ["confirmation_required", "write"],
      ["timeout_capped", "write"],
      ["retry_capped", "calc"],
    ]);
  });

  test("a skill outside the workspace allowlist is refused: the model never sees it, the repair round is told, then the fallback runs", async () => {
    const allowed = new Set([
      "core.pass",
      "qtable.task.split",
      "qtable.task.estimate",
      "qtable.gantt.generate",
      "qtable.table.schema.describe",
      "qtable.task.records.create",
    ]);
    const before = mock.requests.length;
    const sneaky = { steps: [{ stepId: "send", skillName: "test.effect", arguments: { label: "x" } }] };
    mock.script({ toolCall: sneaky }, { toolCall: sneaky });
    const out = await planner().plan({ request: REQUEST, context: context(), allowSkill: (n) => allowed.has(n) });
    const manifest = mock.requests[before]!.messages.find((m: { role: string }) => m.role === "user").content as string;
    expect(manifest).not.toContain("test.effect");
    expect(manifest).not.toContain("qtable.notify.send");
    expect(mock.requests[before + 1]!.messages.at(-1).content).toContain(
      'SKILL_NOT_ALLOWED: step "send": skill "test.effect" is not allowed in this workspace',
    );
    expect(out.planner).toMatchObject({ kind: "fallback", fallbackReason: "validation_failed" });
    expect(out.plan.steps.every((s) => allowed.has(s.skillName))).toBe(true);

    // and when the fallback's skills are not allowed either: PLANNING_FAILED naming them
    mock.script({ toolCall: sneaky }, { toolCall: sneaky });
    const err = await planner()
      .plan({ request: REQUEST, context: context(), allowSkill: (n) => n === "core.pass" })
      .catch((e) => e);
    expect(err.code).toBe("PLANNING_FAILED");
    expect(err.details.missingSkills).toContain("qtable.task.split");
  });

  test("in the graph: the planner node plans the request, the run records the planner, a non-idempotent effect runs once", async () => {
    const rt = createRuntime({
      skills: registry,
      planner: { model: "gpt-test", baseURL: mock.baseURL, timeoutMs: 5_000 },
    });
    mock.script({
      toolCall: {
        steps: [
          {
            stepId: "send",
            skillName: "test.effect",
            arguments: { label: "once", failAfterEffect: true },
            retry: { maxAttempts: 4, retryOn: ["EXECUTION_FAILED"] },
          },
        ],
      },
    });
    const h = rt.runRequest("send it", { context: {} });
    const events = [];
    for await (const e of h.events) events.push(e);
    const view = await h.result;
    expect(events.map((e) => e.type)).toEqual([
      "planning_started",
      "planning_completed",
      "step_started",
      "step_failed",
      "run_failed",
    ]);
    expect(events[0]!.data).toMatchObject({ source: "planner", request: "send it", model: "gpt-test" });
    expect(events[1]!.data).toMatchObject({
      planner: { kind: "llm", model: "gpt-test" },
      repairRounds: 0,
      usage: { totalTokens: 976 },
      warnings: [expect.objectContaining({ code: "retry_not_allowed", stepId: "send" })],
    });
    expect(typeof events[1]!.data.durationMs).toBe("number");
    expect(view.planning).toMatchObject({ kind: "llm", model: "gpt-test", repairRounds: 0 });
    expect(view.steps[0]!.attempts).toBe(1);
    expect([...ledger.effects.entries()].filter(([k]) => k.startsWith(h.runId))).toEqual([[`${h.runId}:send`, 1]]);
    expect((await rt.store.getRow(h.runId))!.plan.steps.map((s) => s.stepId)).toEqual(["send"]);

    // a request nobody can plan: planning_failed, the run fails with PLANNING_FAILED
    const bad = rt.runRequest("What's the weather?", { context: {} });
    mock.script({ status: 503 });
    const evs = [];
    for await (const e of bad.events) evs.push(e);
    const failed = await bad.result;
    expect(evs.map((e) => e.type)).toEqual(["planning_started", "planning_failed", "run_failed"]);
    expect(failed.status).toBe("failed");
    expect(failed.error?.code).toBe("PLANNING_FAILED");
    expect(failed.plan.steps).toEqual([]);
  });

  test("qtable.task.split's model seam (splitWith): the model's raw answer, the problems sent back on repair, a throw when the model fails", async () => {
    expect(modelTaskSplitter({})).toBeUndefined();
    const split = modelTaskSplitter({ model: "gpt-test", baseURL: mock.baseURL, timeoutMs: 5_000 })!;
    const signal = new AbortController().signal;
    const modelTasks = [
      { key: "spec", title: "Write the approval spec", description: "", dependsOn: [] },
      { key: "build", title: "Build approvals", description: "", dependsOn: ["spec"] },
    ];
    const before = mock.requests.length;
    mock.script({ toolCall: { tasks: modelTasks } });
    expect(await split("an approval system", undefined, signal)).toEqual({ tasks: modelTasks });
    expect(mock.requests[before]!.tools[0].function.name).toBe("TaskList");
    mock.script({ toolCall: { tasks: modelTasks } });
    await split("an approval system", undefined, signal, { problems: "task dependencies have a cycle: a -> a" });
    expect(JSON.stringify(mock.requests.at(-1)!.messages)).toContain(
      "rejected: task dependencies have a cycle: a -> a",
    );
    mock.script({ status: 500 });
    await expect(split("an approval system", undefined, signal)).rejects.toThrow();
  });

  test("a run cancelled while the model is still planning stops at once: nothing ran, the run fails with CANCELLED", async () => {
    const rt = createRuntime({
      skills: registry,
      planner: { model: "gpt-test", baseURL: mock.baseURL, timeoutMs: 120_000 },
    });
    mock.script({ hang: true });
    const h = rt.runRequest(REQUEST, { context: context() });
    const types: string[] = [];
    for await (const e of h.events) {
      types.push(e.type);
      if (e.type === "planning_started") await rt.cancel(h.runId, "changed my mind");
    }
    const view = await h.result;
    expect(types).toEqual(["planning_started", "planning_failed", "run_failed"]);
    expect(view.status).toBe("failed");
    expect(view.error).toMatchObject({ code: "CANCELLED", message: "changed my mind" });
    expect(view.steps).toEqual([]);
    mock.script({ toolCall: twoSteps }); // the hanging answer is abandoned; later tests get fresh answers
  });
});
