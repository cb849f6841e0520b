/**
 * The promise the product exists for: no side effect without the confirmation its skill
 * requires, whatever wrote the plan and whatever field of the plan names the skill. Each escape
 * found from outside is tried on the surface a user meets (REST over HTTP, the official MCP client,
 * the LangChain tools in a ToolNode graph, the bare graph as Studio runs it), and the effect is
 * counted by the skill itself (the notify outbox, table rows).
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { AIMessage } from "@langchain/core/messages";
import { END, MemorySaver, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { compileToolchainGraph } from "../graphs/toolchain.js";
import { defaultEnv } from "../graphs/env.js";
import { createToolChainTools } from "../src/index.js";
import { SkillRegistry } from "../src/skills/registry.js";
import { coreSkills } from "../skills/core/index.js";
import { MemoryTableStore, qtableSkills } from "../skills/qtable/index.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, serveApi, until, type ApiUnderTest } from "./helpers/api.js";
import { callTool, mcpClient } from "./helpers/mcp.js";
import { startMockOpenAi, type MockOpenAi } from "./helpers/openai-mock.js";

const WS = "ws-safety";
const OTHER = "ws-safety-b";

/** A step certain to fail, whose fallback would send a message. */
const fallbackSends = (message: string, extra: Record<string, unknown> = {}) => ({
  goal: "announce",
  ...extra,
  steps: [
    {
      stepId: "boom",
      skillName: "core.fail",
      arguments: { message: "always" },
      retry: { maxAttempts: 1 },
      fallback: { skillName: "qtable.notify.send", arguments: { channel: "#approvals", message } },
    },
  ],
});
/** The notify skill with its confirmation removed by the plan. */
const unconfirmedSend = (message: string) => ({
  goal: "announce",
  steps: [
    {
      stepId: "send",
      skillName: "qtable.notify.send",
      requireConfirmation: false,
      arguments: { channel: "#approvals", message },
    },
  ],
});

describe(`plan safety on ${postgresBackend.name}`, () => {
  let api: ApiUnderTest;
  let tables: MemoryTableStore;
  let key: string;
  let relaxKey: string;
  let close: () => Promise<void>;
  let model: MockOpenAi;
  const sent = async (ws = WS) => (await tables.listMessages(ws)).map((m) => m.message);

  beforeAll(async () => {
    tables = new MemoryTableStore();
    await tables.ensureWorkspace(WS);
    await tables.ensureWorkspace(OTHER);
    model = await startMockOpenAi();
    const o = await postgresBackend.open({
      skills: qtableSkills({ store: tables }),
      planner: { model: "gpt-test", baseURL: model.baseURL, timeoutMs: 5_000, maxRetries: 0 },
    });
    close = o.close;
    api = await serveApi(o.runtime, o.db);
    await api.access.ensureWorkspace(WS);
    key = (await api.access.createKey(WS)).key;
    relaxKey = (await api.access.createKey(WS, { permissions: ["relax_confirmation"] })).key;
  });
  afterAll(async () => {
    await api?.close();
    await close?.();
    await model?.close();
  });

  test("REST autoPlan: a model that writes the escapes (requireConfirmation:false on a send, a fallback that sends) sends nothing without a decision", async () => {
    const escape = {
      goal: "announce it",
      steps: [
        {
          stepId: "send",
          skillName: "qtable.notify.send",
          requireConfirmation: false,
          arguments: { channel: "#approvals", message: "model direct" },
        },
        {
          stepId: "boom",
          skillName: "core.fail",
          arguments: {},
          fallback: {
            skillName: "qtable.notify.send",
            arguments: { channel: "#approvals", message: "model fallback" },
          },
        },
      ],
    };
    model.script({ toolCall: escape }, { toolCall: escape });
    const r = await call(api.url, "POST", "/api/tool-chains/run", {
      key: relaxKey,
      body: { request: "announce the approval system in #approvals", autoPlan: true },
    });
    expect(r.status).toBeLessThan(500);
    // whatever the planner made of it (clamped, repaired or the fallback planner's plan), every
    // send is a confirmation still waiting: nothing was sent
    expect(await sent()).not.toContain("model direct");
    expect(await sent()).not.toContain("model fallback");
    expect(r.status).toBe(200);
    expect(r.body.admission.author).toEqual({ kind: "model", via: "planner" });
    expect(r.body.admission.warnings.map((w: { code: string }) => w.code).sort()).toEqual([
      "confirmation_required",
      "fallback_confirmation",
    ]);
    // both sends wait for a person: the clamped step, and the fallback once its step failed
    await until(
      async () =>
        (await call(api.url, "GET", `/api/tool-chains/runs/${r.body.runId}`, { key })).body.pendingConfirmations
          .length === 2,
      20_000,
      "both sends waiting",
    );
    const view = (await call(api.url, "GET", `/api/tool-chains/runs/${r.body.runId}`, { key })).body;
    expect(
      view.pendingConfirmations.map((p: { stepId: string; skillName: string }) => `${p.stepId}:${p.skillName}`).sort(),
    ).toEqual(["boom:qtable.notify.send", "send:qtable.notify.send"]);
    expect(await sent()).not.toContain("model direct");
    expect(await sent()).not.toContain("model fallback");
  });

  test("REST: a fallback skill that requires confirmation waits for a person (preview of the fallback); reject sends nothing, approve sends once", async () => {
    const r = await call(api.url, "POST", "/api/tool-chains/run", {
      key,
      body: { plan: fallbackSends("rejected one") },
    });
    expect(r.status).toBe(200);
    expect(r.body.status).toBe("waiting_confirmation");
    expect(r.body.pendingConfirmations).toEqual([
      expect.objectContaining({
        stepId: "boom",
        skillName: "qtable.notify.send",
        fallback: true,
        preview: { action: "send_message", channel: "#approvals", message: "rejected one" },
        arguments: { channel: "#approvals", message: "rejected one" },
      }),
    ]);
    expect(await sent()).toEqual([]);
    const round = r.body.pendingConfirmations[0].round;
    const rej = await call(api.url, "POST", `/api/tool-chains/runs/${r.body.runId}/confirm`, {
      key,
      body: { stepId: "boom", decision: "reject", round },
    });
    expect(rej.body.status).toBe("failed");
    expect(rej.body.steps[0]).toMatchObject({ status: "failed", error: { code: "REJECTED" } });
    expect(await sent()).toEqual([]);

    const a = await call(api.url, "POST", "/api/tool-chains/run", {
      key,
      body: { plan: fallbackSends("approved one") },
    });
    expect(a.body.status).toBe("waiting_confirmation");
    const ok = await call(api.url, "POST", `/api/tool-chains/runs/${a.body.runId}/confirm`, {
      key,
      body: { stepId: "boom", decision: "approve", round: a.body.pendingConfirmations[0].round },
    });
    expect(ok.body.status).toBe("completed");
    expect(ok.body.steps[0]).toMatchObject({ status: "completed", usedFallback: true });
    expect(await sent()).toEqual(["approved one"]);
    // the same decision again changes nothing: still one message
    await call(api.url, "POST", `/api/tool-chains/runs/${a.body.runId}/confirm`, {
      key,
      body: { stepId: "boom", decision: "approve", round: a.body.pendingConfirmations[0].round },
    });
    expect(await sent()).toEqual(["approved one"]);
  });

  test("REST: edited arguments of a fallback are checked against the fallback skill", async () => {
    const r = await call(api.url, "POST", "/api/tool-chains/run", { key, body: { plan: fallbackSends("to edit") } });
    const bad = await call(api.url, "POST", `/api/tool-chains/runs/${r.body.runId}/confirm`, {
      key,
      body: { stepId: "boom", decision: "approve", arguments: { channel: "#approvals" } },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("INVALID_ARGUMENTS");
    expect(bad.body.error.message).toContain("qtable.notify.send");
    const good = await call(api.url, "POST", `/api/tool-chains/runs/${r.body.runId}/confirm`, {
      key,
      body: { stepId: "boom", decision: "approve", arguments: { channel: "#approvals", message: "edited" } },
    });
    expect(good.body.status).toBe("completed");
    expect(await sent()).toContain("edited");
    expect(await sent()).not.toContain("to edit");
  });

  test("REST: strict rollback refuses an irreversible fallback skill, naming the field; nothing is created", async () => {
    const before = (await call(api.url, "GET", "/api/tool-chains/runs", { key })).body.runs.length;
    const r = await call(api.url, "POST", "/api/tool-chains/run", {
      key,
      body: { plan: fallbackSends("strict", { rollbackMode: "strict" }) },
    });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("NOT_COMPENSABLE");
    expect(r.body.error.message).toContain('fallback skill "qtable.notify.send"');
    expect((await call(api.url, "GET", "/api/tool-chains/runs", { key })).body.runs.length).toBe(before);
  });

  test("REST: a person removes a confirmation only with the key's permission, and never for an external irreversible skill", async () => {
    const plain = await call(api.url, "POST", "/api/tool-chains/run", {
      key,
      body: { plan: unconfirmedSend("no permission") },
    });
    expect(plain.status).toBe(400);
    expect(plain.body.error.code).toBe("CONFIRMATION_REQUIRED");
    expect(plain.body.error.message).toContain("relax_confirmation");
    const permitted = await call(api.url, "POST", "/api/tool-chains/run", {
      key: relaxKey,
      body: { plan: unconfirmedSend("irreversible") },
    });
    expect(permitted.status).toBe(400);
    expect(permitted.body.error.message).toContain("external and cannot be undone");
    expect(await sent()).not.toContain("no permission");
    expect(await sent()).not.toContain("irreversible");
    // a write skill that can be undone: the permitted key may run it unconfirmed
    const table = await tables.ensureWorkspace(WS);
    const records = {
      stepId: "rows",
      skillName: "qtable.task.records.create",
      requireConfirmation: false,
      arguments: { tableId: table.id, tasks: [{ key: "t1", title: "one", estimateDays: 1 }] },
    };
    const ok = await call(api.url, "POST", "/api/tool-chains/run", {
      key: relaxKey,
      body: { plan: { steps: [records] } },
    });
    expect(ok.body.status).toBe("completed");
    expect(ok.body.admission).toMatchObject({
      author: { kind: "person", via: "rest", mayRelaxConfirmation: true },
      warnings: [],
    });
    const refused = await call(api.url, "POST", "/api/tool-chains/run", { key, body: { plan: { steps: [records] } } });
    expect(refused.body.error.code).toBe("CONFIRMATION_REQUIRED");
  });

  test("MCP (official client): an agent's requireConfirmation:false is clamped and its fallback asks; declined, nothing is sent", async () => {
    const asked: string[] = [];
    const client = await mcpClient(api.url, key, { elicit: (q) => (asked.push(q.message), { action: "decline" }) });
    try {
      const a = await callTool(client, "run_tool_chain", { plan: unconfirmedSend("mcp unconfirmed") });
      expect(a.data.status).toBe("failed");
      const b = await callTool(client, "run_tool_chain", { plan: fallbackSends("mcp fallback") });
      expect(b.data.status).toBe("failed");
      expect(asked).toHaveLength(2);
      expect(asked[1]).toContain("qtable.notify.send");
      expect(await sent()).not.toContain("mcp unconfirmed");
      expect(await sent()).not.toContain("mcp fallback");
      const view = await call(api.url, "GET", `/api/tool-chains/runs/${a.data.runId}`, { key });
      expect(view.body.admission.author).toEqual({ kind: "agent", via: "mcp" });
      expect(view.body.admission.warnings).toEqual([
        expect.objectContaining({ code: "confirmation_required", stepId: "send" }),
      ]);
      // over budget: refused with the budget named, nothing runs
      const wide = {
        steps: Array.from({ length: 60 }, (_, i) => ({
          stepId: `s${i}`,
          skillName: "core.pass",
          arguments: { value: i },
        })),
      };
      const c = await callTool(client, "run_tool_chain", { plan: wide });
      expect(c.result.isError).toBe(true);
      expect(JSON.stringify(c.data)).toContain("PLAN_OVER_BUDGET");
      expect(JSON.stringify(c.data)).toContain("maxSteps");
    } finally {
      await client.close();
    }
  });
});

describe("agent tools and the bare graph (memory)", () => {
  test("LangChain tools in a ToolNode: requireConfirmation:false and a fallback both interrupt for a person; the outbox stays empty", async () => {
    const tables = new MemoryTableStore();
    await tables.ensureWorkspace("agents");
    const { Runtime } = await import("../src/runtime/runtime.js");
    const runtime = new Runtime({ skills: qtableSkills({ store: tables }) });
    const tools = createToolChainTools({ runtime, workspaceId: "agents" });
    const graph = new StateGraph(MessagesAnnotation)
      .addNode("tools", new ToolNode(tools))
      .addEdge(START, "tools")
      .addEdge("tools", END)
      .compile({ checkpointer: new MemorySaver() });
    for (const [i, plan] of [unconfirmedSend("agent unconfirmed"), fallbackSends("agent fallback")].entries()) {
      const msg = new AIMessage({
        content: "",
        tool_calls: [{ name: "run_tool_chain", args: { plan }, id: `call-${i}`, type: "tool_call" }],
      });
      const out = (await graph.invoke({ messages: [msg] }, { configurable: { thread_id: `t-${i}` } })) as {
        __interrupt__?: { value: { pending: { skillName: string }[]; runId: string } }[];
      };
      expect(out.__interrupt__?.[0]?.value.pending.map((p) => p.skillName)).toEqual(["qtable.notify.send"]);
      const view = await runtime.getRun(out.__interrupt__![0]!.value.runId);
      expect(view.admission?.author).toEqual({ kind: "agent", via: "agent" });
    }
    expect(await tables.listMessages("agents")).toEqual([]);
  });

  test("the bare graph (Studio input): a plan's requireConfirmation:false on an irreversible skill still interrupts", async () => {
    const tables = new MemoryTableStore();
    await tables.ensureWorkspace("default");
    const registry = new SkillRegistry([...coreSkills, ...qtableSkills({ store: tables })]);
    const graph = compileToolchainGraph(defaultEnv(registry), new MemorySaver());
    const out = (await graph.invoke(
      { plan: unconfirmedSend("studio") },
      { configurable: { thread_id: "studio-1" } },
    )) as { __interrupt__?: { value: { pending: { stepId: string }[] } }[]; admission?: unknown };
    expect(out.__interrupt__?.[0]?.value.pending.map((p) => p.stepId)).toEqual(["send"]);
    const state = await graph.getState({ configurable: { thread_id: "studio-1" } });
    expect((state.values as { admission: { author: unknown } }).admission.author).toEqual({
      kind: "agent",
      via: "studio",
    });
    expect(await tables.listMessages("default")).toEqual([]);
  });

  test("a step completed by its fallback skill is undone by that skill's own compensation; a fallback value is not an effect", async () => {
    const tables = new MemoryTableStore();
    const table = await tables.ensureWorkspace("fb");
    const { Runtime } = await import("../src/runtime/runtime.js");
    const runtime = new Runtime({ skills: qtableSkills({ store: tables }) });
    const plan = {
      onFailure: "fail_fast",
      steps: [
        {
          stepId: "rows",
          skillName: "core.fail",
          retry: { maxAttempts: 1 },
          fallback: {
            skillName: "qtable.task.records.create",
            arguments: { tableId: table.id, tasks: [{ key: "t1", title: "from the fallback", estimateDays: 1 }] },
          },
        },
        {
          stepId: "value",
          skillName: "core.fail",
          retry: { maxAttempts: 1 },
          fallback: { value: { tableId: table.id, recordIds: ["not-an-effect"] } },
        },
        { stepId: "boom", skillName: "core.fail", dependsOn: ["rows", "value"], retry: { maxAttempts: 1 } },
      ],
    };
    const first = await runtime.run(plan, { workspaceId: "fb" }).result;
    expect(first.pendingConfirmations).toEqual([
      expect.objectContaining({ stepId: "rows", skillName: "qtable.task.records.create", fallback: true }),
    ]);
    expect((await tables.listRecords("fb", table.id))?.records ?? []).toEqual([]);
    const done = await (await runtime.confirm(first.runId, { stepId: "rows", decision: "approve" })).result;
    expect(done.status).toBe("rolled_back");
    const byId = Object.fromEntries(done.steps.map((s) => [s.stepId, s]));
    expect(byId.rows).toMatchObject({ status: "rolled_back", usedFallback: true, rollback: { status: "rolled_back" } });
    expect((byId.rows!.output as { recordIds: string[] }).recordIds).toHaveLength(1); // the fallback did write a row
    expect(byId.value).toMatchObject({ usedFallback: true, rollback: { status: "not_needed" } });
    expect((await tables.listRecords("fb", table.id))?.records ?? []).toEqual([]);
  });
});
