/**
 * Split and estimate as a planning user meets them: against a scripted OpenAI-compatible model
 * (valid; invalid then repaired; invalid twice → the labelled template), templates per goal kind,
 * estimates by each task's verb (not the goal's subject) and from a table's completed rows.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { executeAttempt } from "../src/kernel/execute-attempt.js";
import { silentLogger } from "../graphs/env.js";
import type { Skill } from "../src/skills/contract.js";
import { modelTaskSplitter } from "../src/planner/task-splitter.js";
import { MemoryTableStore, qtableSkills, templateTasks, type TableStore } from "../skills/qtable/index.js";
import { estimateTask } from "../skills/qtable/estimate-heuristics.js";
import { startMockOpenAi, type MockOpenAi } from "./helpers/openai-mock.js";

const exec = (skill: Skill, args: unknown, workspaceId = "w1") =>
  executeAttempt({
    skill,
    args,
    runId: "r",
    stepId: "s",
    attempt: 1,
    idempotencyKey: "r:s",
    context: {},
    workspaceId,
    logger: silentLogger,
    signal: new AbortController().signal,
  });
const byName = (skills: Skill[]) => new Map(skills.map((s) => [s.name, s]));

describe("split against a scripted model", () => {
  let mock: MockOpenAi;
  let split: Skill;
  beforeAll(async () => {
    mock = await startMockOpenAi();
    split = byName(
      qtableSkills({
        store: new MemoryTableStore(),
        splitWith: modelTaskSplitter({ model: "gpt-test", baseURL: mock.baseURL, timeoutMs: 5_000 }),
      }),
    ).get("qtable.task.split")!;
  });
  afterAll(() => mock?.close());
  const good = [
    { key: "spec", title: "Write the approval spec", description: "", dependsOn: [] },
    { key: "build", title: "Build approvals", description: "", dependsOn: ["spec"] },
  ];

  test("a valid answer is the model's tasks", async () => {
    mock.reset();
    mock.script({ toolCall: { tasks: good } });
    expect(await exec(split, { goal: "an approval system" })).toMatchObject({
      ok: true,
      output: { tasks: good, source: "model", kind: "software", repairRounds: 0, warnings: [] },
    });
  });

  test("invalid (a cycle), then repaired: the repaired tasks, and the repair prompt named the cycle", async () => {
    mock.reset();
    const before = mock.requests.length;
    mock.script(
      {
        toolCall: {
          tasks: [
            { key: "a", title: "A", dependsOn: ["b"] },
            { key: "b", title: "B", dependsOn: ["a"] },
          ],
        },
      },
      { toolCall: { tasks: good } },
    );
    expect(await exec(split, { goal: "an approval system" })).toMatchObject({
      ok: true,
      output: { tasks: good, source: "model", repairRounds: 1 },
    });
    expect(mock.requests.length - before).toBe(2);
    expect(JSON.stringify(mock.requests[before + 1]!.messages)).toContain(
      "task dependencies have a cycle: a -> b -> a",
    );
  });

  test("invalid twice (duplicate keys, then a dangling dependency): the template, labelled in the output and a warning", async () => {
    mock.reset();
    mock.script(
      { toolCall: { tasks: [good[0], good[0]] } },
      { toolCall: { tasks: [{ key: "x", title: "X", dependsOn: ["ghost"] }] } },
    );
    const r = await exec(split, { goal: "Organise the company summer party with catering and music" });
    expect(r).toMatchObject({ ok: true, output: { source: "template", kind: "event", repairRounds: 1 } });
    const out = (r as { output: { tasks: { key: string }[]; warnings: string[] } }).output;
    expect(out.tasks).toEqual(templateTasks("Organise the company summer party with catering and music").tasks);
    expect(out.warnings).toEqual([expect.stringMatching(/invalid twice .*ghost.*"event" template/)]);
  });

  test("a model error: the template at once, saying why", async () => {
    mock.reset();
    mock.script({ status: 400, message: "bad request" });
    const r = await exec(split, { goal: "Migrate the data warehouse to Postgres" });
    expect(r).toMatchObject({
      ok: true,
      output: {
        source: "template",
        kind: "migration",
        repairRounds: 0,
        warnings: [expect.stringContaining("the model did not answer")],
      },
    });
  });
});

describe("templates follow the goal's kind", () => {
  test.each([
    [
      "Build a customer onboarding portal including SSO and billing",
      "software",
      ["requirements", "design", "build-sso", "build-billing", "test", "docs", "rollout"],
    ],
    [
      "Organise our annual developer conference with workshops and a hackathon",
      "event",
      ["goals", "venue", "program", "arrange-workshops", "arrange-hackathon", "invite", "rehearse", "run", "follow-up"],
    ],
    [
      "Plan the spring marketing campaign with a newsletter and social ads",
      "campaign",
      ["brief", "plan", "produce-newsletter", "produce-social-ads", "review", "launch", "report"],
    ],
    [
      "Plan the data warehouse migration",
      "migration",
      ["inventory", "design", "migrate", "validate", "docs", "cutover", "decommission"],
    ],
    ["Hire two backend engineers", "hiring", ["role", "posting", "source", "screen", "interview", "offer", "onboard"]],
    ["Renovate the office kitchen", "project", ["scope", "plan", "execute", "review", "close"]],
  ])("%s → %s", (goal, kind, keys) => {
    const t = templateTasks(goal);
    expect(t.kind).toBe(kind);
    expect(t.tasks.map((x) => x.key)).toEqual(keys);
  });

  test("without a model the split says it is a template", async () => {
    const split = byName(qtableSkills({ store: new MemoryTableStore() })).get("qtable.task.split")!;
    expect(split.description).toContain("No model is configured");
    expect(await exec(split, { goal: "Hire a designer" })).toMatchObject({
      ok: true,
      output: { source: "template", kind: "hiring", warnings: [expect.stringContaining("no model is configured")] },
    });
  });
});

describe("estimates", () => {
  test("by each task's verb, not the goal's subject: the data warehouse migration's docs, rollout and tests differ", () => {
    const tasks = templateTasks("Plan the data warehouse migration").tasks;
    const e = new Map(tasks.map((t) => [t.key, estimateTask(t)]));
    expect(e.get("docs")!.likely).toBeLessThan(e.get("migrate")!.likely);
    expect(e.get("cutover")!.likely).toBeLessThan(e.get("migrate")!.likely);
    expect(e.get("validate")!.likely).toBeLessThan(e.get("migrate")!.likely);
    expect(new Set(["docs", "validate", "migrate"].map((k) => e.get(k)!.likely)).size).toBe(3);
    // "Roll out the data warehouse migration": a rollout, though "migration" is in it
    expect(estimateTask({ key: "k", title: "Roll out the data warehouse migration" }).likely).toBe(
      estimateTask({ key: "k", title: "Roll out the approval system" }).likely,
    );
    for (const x of e.values()) {
      expect(x.optimistic).toBeLessThanOrEqual(x.likely);
      expect(x.likely).toBeLessThanOrEqual(x.pessimistic);
      expect(x.expected).toBeCloseTo((x.optimistic + 4 * x.likely + x.pessimistic) / 6, 1);
      expect(x.days).toBeGreaterThanOrEqual(x.expected);
      expect(x.days * 2).toBe(Math.round(x.days * 2));
    }
  });

  test("from a table's completed rows with similar titles; other tasks by heuristics; the description says what it uses", async () => {
    const store: TableStore = new MemoryTableStore();
    const t = await store.ensureWorkspace("hist");
    await store.createRecords(
      "hist",
      t.id,
      [
        { title: "Design the billing system", status: "done", start: "2026-03-02", end: "2026-03-11" }, // 8 working days
        { title: "Design the invoicing system", status: "done", estimateDays: 6 },
        { title: "Design the payroll system", status: "doing", estimateDays: 40 }, // not done: ignored
        { title: "Water the plants", status: "done", estimateDays: 1 },
      ],
      "seed",
    );
    const est = byName(qtableSkills({ store })).get("qtable.task.estimate")!;
    expect(est.description).toContain("completed rows");
    expect(est.description).toContain("No model is used");
    const r = await exec(
      est,
      {
        tableId: "Tasks",
        tasks: [
          { key: "design", title: "Design the approval system" },
          { key: "build", title: "Build the approval system" },
        ],
      },
      "hist",
    );
    expect(r).toMatchObject({
      ok: true,
      output: {
        estimates: [
          {
            key: "design",
            source: "history",
            optimistic: 6,
            likely: 7,
            pessimistic: 8,
            basis: ["Design the invoicing system", "Design the billing system"],
          },
          { key: "build", source: "heuristic" },
        ],
      },
    });
    // another workspace's table is not history
    expect(await exec(est, { tableId: t.id, tasks: [{ key: "a", title: "A" }] }, "other")).toMatchObject({
      ok: false,
      error: { code: "TABLE_NOT_FOUND" },
    });
    expect(
      await exec(est, {
        tasks: [
          { key: "a", title: "A" },
          { key: "a", title: "B" },
        ],
      }),
    ).toMatchObject({ ok: false, error: { code: "INVALID_INPUT", message: "duplicate task keys: a" } });
  });

  test("from the model when configured, validated, repaired once", async () => {
    const tasks = [
      { key: "a", title: "Design it" },
      { key: "b", title: "Build it", dependsOn: ["a"] },
    ];
    const answers: unknown[] = [
      [
        { key: "a", optimistic: 1, likely: 2, pessimistic: 4, confidence: 0.8 },
        { key: "b", optimistic: 3, likely: 5, pessimistic: 9 },
      ],
      [
        { key: "a", optimistic: 5, likely: 2, pessimistic: 4 },
        { key: "b", likely: 5 },
      ],
      // the repair round: still optimistic > likely
      {
        estimates: [
          { key: "a", optimistic: 3, likely: 2 },
          { key: "b", likely: 5 },
        ],
      },
    ];
    const est = byName(qtableSkills({ store: new MemoryTableStore(), estimateWith: async () => answers.shift() })).get(
      "qtable.task.estimate",
    )!;
    expect(est.description).toContain("the configured model");
    expect(await exec(est, { tasks })).toMatchObject({
      ok: true,
      output: {
        estimates: [
          { key: "a", source: "model", expected: 2.2, days: 2.5, confidence: 0.8 },
          { key: "b", source: "model", expected: 5.3 },
        ],
        warnings: [],
      },
    });
    expect(await exec(est, { tasks })).toMatchObject({
      ok: true,
      output: {
        estimates: [{ source: "heuristic" }, { source: "heuristic" }],
        warnings: [expect.stringContaining("optimistic ≤ likely ≤ pessimistic")],
      },
    });
  });
});
