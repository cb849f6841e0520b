/**
 * LangGraph Studio's side of the graph, through LangGraph's own dev server (@langchain/langgraph-cli,
 * in-memory API server, analytics off, a free loopback port: 2024 is taken on these machines)
 * and its SDK, started from this checkout as a new user would (no .env). Two parallel
 * confirmations answered one at a time with `Command({ resume })`, a bad resume value, a forged
 * `steps` input, an invalid plan, and the QTable approval-system chain (given, and planned from a request).
 */
import { readFileSync } from "node:fs";
import type { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { startLangGraphDev, type LangGraphDev } from "./helpers/langgraph-dev.js";

let dev: LangGraphDev | undefined;
let client: Client;

beforeAll(async () => {
  dev = await startLangGraphDev();
  client = dev.client;
}, 120_000);

afterAll(() => dev?.stop());

const twoConfirmations = {
  steps: [
    { stepId: "a", skillName: "core.pass", arguments: { value: 1 }, requireConfirmation: true },
    { stepId: "b", skillName: "core.pass", arguments: { value: 2 }, requireConfirmation: true },
    { stepId: "c", skillName: "core.pass", dependsOn: ["a", "b"], arguments: { value: { $ref: "steps.a" } } },
  ],
};

type Pending = { stepId: string; skillName: string; round: number; kind: string; arguments: unknown };
type Payload = {
  type: string;
  runId: string;
  pending: Pending[];
  resume: { shape: string; example: unknown };
  resumeError?: { code: string; message: string };
};

async function interruptOf(threadId: string): Promise<Payload | undefined> {
  const st = await client.threads.getState(threadId);
  return st.tasks.flatMap((t) => t.interrupts ?? []).map((i) => i.value as Payload)[0];
}

describe("LangGraph dev server and SDK", () => {
  test("the input schema is the explicit one (plan with every step field, or request), fast", async () => {
    const [assistant] = await client.assistants.search({ graphId: "toolchain" });
    const t0 = performance.now();
    const schemas = await client.assistants.getSchemas(assistant!.assistant_id);
    const ms = performance.now() - t0;
    const input = schemas.input_schema as { properties: Record<string, unknown> };
    expect(Object.keys(input.properties).sort()).toEqual(["context", "memory", "plan", "request", "runId"]);
    const plan = JSON.stringify(input.properties.plan);
    for (const f of ["stepId", "skillName", "arguments", "dependsOn", "requireConfirmation", "retry", "rollback"])
      expect(plan).toContain(`"${f}"`);
    expect(JSON.stringify(schemas)).not.toContain(process.cwd()); // no absolute paths in $ref names
    const output = schemas.output_schema as { properties: Record<string, unknown> };
    expect(Object.keys(output.properties).sort()).toEqual([
      "error",
      "memory",
      "plan",
      "planning",
      "runId",
      "status",
      "steps",
    ]);
    expect(ms).toBeLessThan(5_000); // was ~7 s when derived from the TypeScript state type
  });

  test("two parallel confirmations answered one at a time; a bad resume value comes back as resumeError", async () => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "toolchain", { input: { plan: twoConfirmations } });
    const first = await interruptOf(thread.thread_id);
    expect(first?.type).toBe("confirmation");
    expect(first?.pending.map((p) => p.stepId)).toEqual(["a", "b"]);
    expect(first?.resume.example).toEqual({ decisions: { a: { decision: "approve", comment: "looks right" } } });

    for (const bad of ["approve", { decisions: { zz: { decision: "approve" } } }, { decision: "yes" }]) {
      await client.runs.wait(thread.thread_id, "toolchain", { command: { resume: bad } });
      const again = await interruptOf(thread.thread_id);
      expect(again?.resumeError?.code).toBe("INVALID_DECISION");
      expect(again?.pending.map((p) => p.stepId)).toEqual(["a", "b"]);
    }

    await client.runs.wait(thread.thread_id, "toolchain", {
      command: { resume: { decisions: { a: { decision: "approve" } } } },
    });
    let st = await client.threads.getState(thread.thread_id);
    const v = st.values as { steps: Record<string, { status: string; output?: unknown }>; status: string };
    expect(v.steps.a!.status).toBe("completed");
    expect(v.steps.b!.status).toBe("waiting_confirmation");
    expect((await interruptOf(thread.thread_id))?.pending.map((p) => p.stepId)).toEqual(["b"]);

    const final = (await client.runs.wait(thread.thread_id, "toolchain", {
      command: { resume: { decisions: { b: { decision: "approve", comment: "fine" } } } },
    })) as Record<string, any>;
    expect(final.status).toBe("completed");
    expect(final.steps.c.output).toBe(1);
    st = await client.threads.getState(thread.thread_id);
    expect(st.next).toEqual([]);
    // time travel: the history holds the waiting states
    const history = await client.threads.getHistory(thread.thread_id, { limit: 50 });
    expect(history.some((h) => h.next.includes("approval"))).toBe(true);
  });

  test("a forged steps input fails the run before anything reaches state", async () => {
    const thread = await client.threads.create();
    await expect(
      client.runs.wait(thread.thread_id, "toolchain", {
        input: { plan: twoConfirmations, steps: { a: { status: "completed", attempts: 1, output: "FORGED" } } },
      }),
    ).rejects.toThrow(/Unrecognized key/);
    const runs = await client.runs.list(thread.thread_id);
    expect(runs.map((r) => r.status)).toEqual(["error"]);
    const st = await client.threads.getState(thread.thread_id);
    expect((st.values as { steps?: unknown }).steps ?? {}).toEqual({});
  });

  test("the README's approval-system chain (QTable pack) and a request planned in the graph: waits at the records, approved, records created", async () => {
    const plan = JSON.parse(readFileSync("examples/approval-system.plan.json", "utf8"));
    const context = JSON.parse(readFileSync("examples/approval-system.context.json", "utf8"));
    for (const input of [
      { plan, context },
      {
        request:
          "plan an approval system, estimate the effort, build a timeline and put the tasks into the current table",
        context,
      },
    ]) {
      const thread = await client.threads.create();
      await client.runs.wait(thread.thread_id, "toolchain", { input });
      const waiting = await interruptOf(thread.thread_id);
      const create = waiting?.pending.find((p) => p.skillName === "qtable.task.records.create");
      expect(create, JSON.stringify(waiting)).toBeDefined();
      const final = (await client.runs.wait(thread.thread_id, "toolchain", {
        command: { resume: { decisions: { [create!.stepId]: { decision: "approve" } } } },
      })) as Record<string, any>;
      expect(final.status).toBe("completed");
      // the second run plans the same goal into the same table: its rows are updated by key, not duplicated
      const out = final.steps[create!.stepId].output as { recordIds: string[]; updatedIds?: string[] };
      expect(out.recordIds.length + (out.updatedIds?.length ?? 0)).toBeGreaterThan(2);
    }
  });

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
  ])("an invalid plan (%s) ends the LangGraph run in error with its code", async (code, plan) => {
    const thread = await client.threads.create();
    await expect(client.runs.wait(thread.thread_id, "toolchain", { input: { plan } })).rejects.toThrow(
      new RegExp(`${code}: `),
    );
    const runs = await client.runs.list(thread.thread_id);
    expect(runs.map((r) => r.status)).toEqual(["error"]);
  });
});
