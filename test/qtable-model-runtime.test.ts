/**
 * The split and the estimate on the planner's model, as openRuntime wires them (one model
 * configuration), on Postgres (the server at DATABASE_URL, else embedded PGlite), against a local
 * OpenAI-compatible server through the real @langchain/openai client: good answers are used;
 * invalid JSON, schema violations and pessimistic < optimistic are repaired once (the repair
 * prompt names the problem); still bad, the estimate falls back to the table's history and each
 * task's verb with a warning.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { openRuntime, type OpenedRuntime } from "../src/runtime/open.js";
import { freshSchema, serverUrl } from "./helpers/backends.js";
import { startMockOpenAi, type MockOpenAi } from "./helpers/openai-mock.js";
import { settle, stepOf } from "./helpers/run.js";

const TASKS = [
  { key: "design", title: "Design the approval flow", description: "", dependsOn: [] },
  { key: "build", title: "Build the approval flow", description: "", dependsOn: ["design"] },
];
const PLAN = {
  planId: "split-estimate",
  goal: "Plan an approval system",
  steps: [
    { stepId: "split", skillName: "qtable.task.split", arguments: { goal: "Plan an approval system" } },
    {
      stepId: "estimate",
      skillName: "qtable.task.estimate",
      dependsOn: ["split"],
      arguments: { tasks: { $ref: "steps.split.tasks" } },
    },
    {
      stepId: "gantt",
      skillName: "qtable.gantt.generate",
      dependsOn: ["estimate"],
      arguments: {
        tasks: { $ref: "steps.split.tasks" },
        estimates: { $ref: "steps.estimate.estimates" },
        startDate: "2027-03-01",
      },
    },
  ],
};

type EstimateOut = {
  estimates: { key: string; source: string; optimistic: number; likely: number; pessimistic: number; days: number }[];
  warnings: string[];
};

describe(`split and estimate on the planner's model, ${serverUrl ? "server Postgres" : "embedded PGlite"}`, () => {
  let mock: MockOpenAi;
  let o: OpenedRuntime;
  const schema = freshSchema("qtm");
  beforeAll(async () => {
    mock = await startMockOpenAi();
    o = await openRuntime({
      databaseUrl: serverUrl,
      dataDir: ":memory:",
      schema,
      poolSize: 4,
      planner: { model: "gpt-test", baseURL: mock.baseURL, timeoutMs: 10_000, maxRetries: 0 },
    });
  }, 60_000);
  afterAll(async () => {
    if (o?.db.kind === "server") await o.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
    await o?.close();
    await mock?.close();
  });

  const run = async () => {
    const { view } = await settle(o.runtime.run(PLAN, { workspaceId: "ws-model" }));
    expect(view.status).toBe("completed");
    return {
      split: stepOf(view, "split").output as { source: string; tasks: unknown[] },
      estimate: stepOf(view, "estimate").output as EstimateOut,
      gantt: stepOf(view, "gantt").output as { finish: string },
    };
  };
  const estimateRequests = () => mock.requests.filter((r) => r.tools?.[0]?.function?.name === "TaskEstimates");

  test("the skills' descriptions say they use the model", () => {
    const names = new Map(o.runtime.registry.list().map((s) => [s.name, s.description]));
    expect(names.get("qtable.task.estimate")).toContain("the configured model");
    expect(names.get("qtable.task.split")).toContain("with the configured model");
  });

  test("a valid answer: the model's three points, scheduled", async () => {
    mock.reset();
    mock.script(
      { toolCall: { tasks: TASKS } },
      {
        toolCall: {
          estimates: [
            { key: "design", optimistic: 1, likely: 2, pessimistic: 4, confidence: 0.8 },
            { key: "build", optimistic: 2, likely: 3, pessimistic: 7, confidence: null },
          ],
        },
      },
    );
    const r = await run();
    expect(r.split.source).toBe("model");
    expect(r.estimate).toMatchObject({
      estimates: [
        { key: "design", source: "model", optimistic: 1, likely: 2, pessimistic: 4, days: 2.5 },
        { key: "build", source: "model", optimistic: 2, likely: 3, pessimistic: 7, days: 3.5 },
      ],
      warnings: [],
    });
    // the model saw the tasks, bound to the estimates function
    expect(JSON.stringify(estimateRequests().at(-1)!.messages)).toContain("Design the approval flow");
    // 2.5 + 3.5 working days from Monday 1 March: Wednesday midday, then to Monday's end
    expect(r.gantt.finish).toBe("2027-03-08");
  });

  test("invalid JSON, then repaired: the model's estimates; the repair prompt said why", async () => {
    mock.reset();
    const before = estimateRequests().length;
    mock.script(
      { toolCall: { tasks: TASKS } },
      { toolCall: '{"estimates": [{"key": "design", "optimistic": 1,' },
      {
        toolCall: {
          estimates: [
            { key: "design", optimistic: 1, likely: 1, pessimistic: 2 },
            { key: "build", optimistic: 2, likely: 2, pessimistic: 3 },
          ],
        },
      },
    );
    const r = await run();
    expect(r.estimate.estimates.map((e) => e.source)).toEqual(["model", "model"]);
    expect(r.estimate.warnings).toEqual([]);
    const asked = estimateRequests().slice(before);
    expect(asked).toHaveLength(2);
    expect(JSON.stringify(asked[1]!.messages)).toContain(
      "Your previous estimate list was rejected: the answer is not JSON",
    );
  });

  test("pessimistic < optimistic, then repaired", async () => {
    mock.reset();
    const before = estimateRequests().length;
    mock.script(
      { toolCall: { tasks: TASKS } },
      {
        toolCall: {
          estimates: [
            { key: "design", optimistic: 4, likely: 2, pessimistic: 1 },
            { key: "build", optimistic: 2, likely: 3, pessimistic: 5 },
          ],
        },
      },
      {
        toolCall: {
          estimates: [
            { key: "design", optimistic: 1, likely: 2, pessimistic: 4 },
            { key: "build", optimistic: 2, likely: 3, pessimistic: 5 },
          ],
        },
      },
    );
    const r = await run();
    expect(r.estimate.estimates[0]).toMatchObject({ source: "model", optimistic: 1, pessimistic: 4 });
    const asked = estimateRequests().slice(before);
    expect(JSON.stringify(asked[1]!.messages)).toContain("optimistic ≤ likely ≤ pessimistic");
  });

  test("a schema violation, then a task missing: invalid twice, history and heuristics with a warning", async () => {
    mock.reset();
    const before = estimateRequests().length;
    mock.script(
      { toolCall: { tasks: TASKS } },
      { toolCall: { estimates: [{ key: "design", optimistic: "soon" }] } },
      { toolCall: { estimates: [{ key: "design", optimistic: 1, likely: 2, pessimistic: 3 }] } },
    );
    const r = await run();
    expect(estimateRequests().length - before).toBe(2);
    expect(r.estimate.estimates.map((e) => e.source)).toEqual(["heuristic", "heuristic"]);
    expect(r.estimate.warnings).toEqual([
      expect.stringMatching(
        /^the model's estimates were invalid twice \(last: every task exactly once \(missing: build; unknown: none\)\); estimated from history and heuristics instead$/,
      ),
    ]);
  });

  test("the model fails (HTTP 400): no repair, heuristics with a warning saying why", async () => {
    mock.reset();
    const before = estimateRequests().length;
    mock.script({ toolCall: { tasks: TASKS } }, { status: 400, message: "bad request" });
    const r = await run();
    expect(estimateRequests().length - before).toBe(1);
    expect(r.estimate.estimates.map((e) => e.source)).toEqual(["heuristic", "heuristic"]);
    expect(r.estimate.warnings).toEqual([
      expect.stringContaining("the model did not answer (the model endpoint refused"),
    ]);
  });

  test("the split's unreadable answer is repaired too", async () => {
    mock.reset();
    mock.script(
      { toolCall: "not json at all" },
      { toolCall: { tasks: TASKS } },
      {
        toolCall: {
          estimates: [
            { key: "design", optimistic: 1, likely: 2, pessimistic: 4 },
            { key: "build", optimistic: 2, likely: 3, pessimistic: 7 },
          ],
        },
      },
    );
    const r = await run();
    expect(r.split).toMatchObject({ source: "model", repairRounds: 1 });
  });
});
