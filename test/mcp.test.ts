/**
 * Chains as MCP tools, driven by the official SDK client over real HTTP against the real app
 * (random port, Postgres: embedded or DATABASE_URL): listing, confirmations answered through
 * elicitation (accept, decline, cancel, several steps in turn, no answer in time), a client
 * without elicitation answering with confirm_tool_chain_step, keys and workspaces, the allowlist.
 * Effects are counted: an approved step runs once, a declined one never.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { ElicitRequest } from "@modelcontextprotocol/sdk/types.js";
import { ToolChainRunResultSchema, TOOL_NAMES } from "../src/tools/definitions.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, newKey, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { callTool, mcpClient } from "./helpers/mcp.js";
import { approvalSkill, EffectLedger } from "./helpers/skills.js";
import { MemoryTableStore, qtableSkills } from "../skills/qtable/index.js";

const REQUEST =
  "Plan an approval system, estimate the effort, build a timeline and put the tasks into the current table";

/** prep → pubA, pubB (both wait for confirmation) → after */
const twoApprovals = (title: string) => ({
  goal: `publish ${title}`,
  steps: [
    { stepId: "prep", skillName: "core.pass", arguments: { value: title } },
    { stepId: "pubA", skillName: "test.publish", dependsOn: ["prep"], arguments: { title: { $ref: "steps.prep" } } },
    { stepId: "pubB", skillName: "test.publish", dependsOn: ["prep"], arguments: { title: `${title}-b` } },
    {
      stepId: "after",
      skillName: "core.pass",
      dependsOn: ["pubA", "pubB"],
      arguments: { value: { a: { $ref: "steps.pubA.published" }, b: { $ref: "steps.pubB.published" } } },
    },
  ],
});
const oneApproval = (title: string) => ({
  steps: [
    { stepId: "prep", skillName: "core.pass", arguments: { value: title } },
    { stepId: "pub", skillName: "test.publish", dependsOn: ["prep"], arguments: { title: { $ref: "steps.prep" } } },
  ],
});

describe(`MCP over HTTP on ${postgresBackend.name}`, () => {
  let api: ApiUnderTest;
  let impatient: ApiUnderTest; // same runtime, a short elicitation answer timeout
  let keyA: string;
  let keyB: string;
  let ledger: EffectLedger;
  let tables: MemoryTableStore;
  let tableId: string;
  let close: () => Promise<void>;
  const clients: Client[] = [];
  const connect = async (...a: Parameters<typeof mcpClient>) => {
    const c = await mcpClient(...a);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    ledger = new EffectLedger();
    tables = new MemoryTableStore();
    tableId = (await tables.ensureWorkspace("ws-mcp-a")).id;
    const o = await postgresBackend.open({ skills: [approvalSkill(ledger), ...qtableSkills({ store: tables })] });
    api = await serveApi(o.runtime, o.db);
    impatient = await serveApi(o.runtime, o.db, {
      live: api.live,
      access: api.access,
      mcp: { elicitationTimeoutMs: 200 },
    });
    keyA = await newKey(api.access, "ws-mcp-a");
    keyB = await newKey(api.access, "ws-mcp-b", ["core.*"]);
    close = async () => {
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
      await impatient.close();
      await api.close();
      await o.close();
    };
  });
  afterAll(() => close?.());

  const effectsOf = (runId: string, stepId: string) => ledger.effects.get(`${runId}:${stepId}`) ?? 0;

  test("lists the five tools with input and output schemas and model-facing descriptions", async () => {
    const client = await connect(api.url, keyA);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...TOOL_NAMES].sort());
    for (const t of tools) {
      expect(t.description!.length, t.name).toBeGreaterThan(60);
      expect(t.inputSchema.type).toBe("object");
      expect(t.outputSchema?.type, t.name).toBe("object");
    }
    const run = tools.find((t) => t.name === "run_tool_chain")!;
    expect(Object.keys(run.inputSchema.properties!)).toEqual(expect.arrayContaining(["request", "plan", "context"]));
    expect((run.inputSchema.properties!.plan as { properties: Record<string, unknown> }).properties).toHaveProperty(
      "steps",
    );
    const confirm = tools.find((t) => t.name === "confirm_tool_chain_step")!;
    expect(confirm.inputSchema.required).toEqual(expect.arrayContaining(["runId", "stepId", "decision"]));
    expect(client.getInstructions()).toMatch(/confirm_tool_chain_step/);
  });

  test("elicitation: both waiting steps are asked in turn, accepted, and the call ends with the result; progress is reported", async () => {
    const asked: ElicitRequest["params"][] = [];
    const client = await connect(api.url, keyA, {
      elicit: (q) => (asked.push(q), { action: "accept", content: { comment: "looks right" } }),
    });
    const r = await callTool(
      client,
      "run_tool_chain",
      { plan: twoApprovals("doc1"), context: { who: "tests" } },
      { progress: true },
    );
    expect(r.result.isError).toBeFalsy();
    const out = ToolChainRunResultSchema.parse(r.data);
    expect(out).toMatchObject({ status: "completed", pending: [], outputs: { after: { a: "doc1", b: "doc1-b" } } });
    expect(asked).toHaveLength(2);
    const askedSteps = asked.map((q) => /Step "(\w+)"/.exec(q.message)![1]).sort();
    expect(askedSteps).toEqual(["pubA", "pubB"]);
    const qA = asked.find((q) => q.message.includes('"pubA"'))!;
    expect(qA.message).toContain('Preview: {"willPublish":"doc1"}');
    expect(qA.message).toContain('Arguments: {"title":"doc1"}');
    expect(qA.message).toContain(out.runId);
    expect(effectsOf(out.runId, "pubA")).toBe(1);
    expect(effectsOf(out.runId, "pubB")).toBe(1);
    // the decisions went through the durable confirm path, with the user's comment
    const events = (await call(api.url, "GET", `/api/tool-chains/runs/${out.runId}/events`, { key: keyA })).body
      .events as { type: string; stepId?: string; data: Record<string, unknown> }[];
    const confirmed = events.filter((e) => e.type === "step_confirmed");
    expect(confirmed.map((e) => [e.stepId, e.data.decision, e.data.comment]).sort()).toEqual([
      ["pubA", "approve", "looks right"],
      ["pubB", "approve", "looks right"],
    ]);
    // progress: growing, out of 2 × steps, naming steps
    expect(r.progress.length).toBeGreaterThanOrEqual(2);
    expect(r.progress.every((p, i) => p.total === 8 && (i === 0 || p.progress > r.progress[i - 1]!.progress))).toBe(
      true,
    );
    expect(r.progress.map((p) => p.message)).toContain("step prep completed");
    expect(r.text).toContain(`Run ${out.runId}: completed`);
  });

  test("elicitation answers are the person's behind the session: a personal key's user is recorded as `by`, via mcp", async () => {
    const personal = (
      await api.access.createKey("ws-mcp-a", {
        user: { id: "ana", name: "Ana Lopez", roles: ["operator", "approver"] },
      })
    ).key;
    const client = await connect(api.url, personal, { elicit: () => ({ action: "accept", content: {} }) });
    const r = await callTool(client, "run_tool_chain", { plan: oneApproval("doc-who") });
    const out = ToolChainRunResultSchema.parse(r.data);
    expect(out.status).toBe("completed");
    expect(effectsOf(out.runId, "pub")).toBe(1);
    const events = (await call(api.url, "GET", `/api/tool-chains/runs/${out.runId}/events`, { key: keyA })).body
      .events as { type: string; stepId?: string; data: Record<string, unknown> }[];
    const confirmed = events.find((e) => e.type === "step_confirmed" && e.stepId === "pub")!;
    expect(confirmed.data).toMatchObject({
      decision: "approve",
      by: { kind: "user", id: "ana", name: "Ana Lopez" },
      via: "mcp",
    });
    const view = (await call(api.url, "GET", `/api/tool-chains/runs/${out.runId}`, { key: keyA })).body as {
      steps: { stepId: string; decision: { by: unknown; via: string } | null }[];
    };
    expect(view.steps.find((s) => s.stepId === "pub")!.decision).toMatchObject({
      by: { kind: "user", id: "ana" },
      via: "mcp",
    });
  });

  test("elicitation: decline rejects the step (never executed); cancel cancels the run", async () => {
    const declining = await connect(api.url, keyA, { elicit: () => ({ action: "decline" }) });
    const d = await callTool(declining, "run_tool_chain", { plan: oneApproval("doc2") });
    expect(d.data).toMatchObject({
      status: "failed",
      steps: [
        { stepId: "prep", status: "completed" },
        { stepId: "pub", status: "failed", error: { code: "REJECTED" } },
      ],
    });
    expect(effectsOf(d.data.runId, "pub")).toBe(0);
    expect(ledger.log).not.toContain("publish:doc2");

    const cancelling = await connect(api.url, keyA, { elicit: () => ({ action: "cancel" }) });
    const c = await callTool(cancelling, "run_tool_chain", { plan: oneApproval("doc3") });
    expect(c.data.status).toBe("cancelled");
    expect(c.data.steps.find((s: { stepId: string }) => s.stepId === "pub").status).toBe("cancelled");
    expect(effectsOf(c.data.runId, "pub")).toBe(0);
  });

  test("without elicitation: the call returns waiting_confirmation at once; confirm_tool_chain_step finishes the run", async () => {
    const client = await connect(api.url, keyA);
    const w = await callTool(client, "run_tool_chain", { plan: oneApproval("doc4") });
    expect(w.data).toMatchObject({
      status: "waiting_confirmation",
      pending: [
        {
          stepId: "pub",
          skillName: "test.publish",
          arguments: { title: "doc4" },
          preview: { willPublish: "doc4" },
          kind: "confirmation",
        },
      ],
    });
    const runId = w.data.runId as string;
    expect(w.text).toContain("confirm_tool_chain_step");
    expect((await callTool(client, "get_tool_chain_run", { runId })).data).toMatchObject({
      runId,
      status: "waiting_confirmation",
    });
    // the same run seen over REST
    expect(
      (await call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key: keyA })).body.pendingConfirmations,
    ).toHaveLength(1);

    const c = await callTool(
      client,
      "confirm_tool_chain_step",
      { runId, stepId: "pub", decision: "approve", comment: "go" },
      { progress: true },
    );
    expect(c.data).toMatchObject({
      runId,
      status: "completed",
      pending: [],
      steps: [{ stepId: "prep" }, { stepId: "pub", status: "completed", output: { published: "doc4" } }],
    });
    expect(c.progress.at(-1)).toMatchObject({ progress: 4, total: 4 });
    // a repeat is refused with the durable path's code and runs nothing again
    const again = await callTool(client, "confirm_tool_chain_step", { runId, stepId: "pub", decision: "reject" });
    expect([again.result.isError, again.data.error.code]).toEqual([true, "CONFIRMATION_NOT_PENDING"]);
    expect(effectsOf(runId, "pub")).toBe(1);
  });

  test("a user who does not answer in time: the call returns the waiting run; another session answers it later", async () => {
    let release!: () => void;
    const never = new Promise<void>((r) => (release = r));
    const slow = await connect(impatient.url, keyA, { elicit: async () => (await never, { action: "accept" }) });
    const w = await callTool(slow, "run_tool_chain", { plan: oneApproval("doc5") });
    release();
    expect(w.data).toMatchObject({ status: "waiting_confirmation", pending: [{ stepId: "pub" }] });
    const runId = w.data.runId as string;
    expect(effectsOf(runId, "pub")).toBe(0); // the late answer decided nothing
    const other = await connect(api.url, keyA);
    const c = await callTool(other, "confirm_tool_chain_step", { runId, stepId: "pub", decision: "approve" });
    expect(c.data.status).toBe("completed");
    expect(effectsOf(runId, "pub")).toBe(1);
  });

  test("cancel_tool_chain_run cancels a waiting run", async () => {
    const client = await connect(api.url, keyA);
    const w = await callTool(client, "run_tool_chain", { plan: oneApproval("doc6") });
    const c = await callTool(client, "cancel_tool_chain_run", { runId: w.data.runId, reason: "changed my mind" });
    expect(c.data).toMatchObject({ runId: w.data.runId, status: "cancelled" });
    expect(effectsOf(w.data.runId, "pub")).toBe(0);
  });

  test("a wrong key answers 401 (the SDK client cannot connect); no key likewise", async () => {
    await expect(mcpClient(api.url, "tck_not-a-real-key")).rejects.toThrow();
    const init = {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } },
    };
    const headers = { accept: "application/json, text/event-stream" };
    const wrong = await call(api.url, "POST", "/mcp", { key: "tck_wrong", body: init, headers });
    expect([wrong.status, wrong.body.error.code]).toEqual([401, "UNAUTHORIZED"]);
    const none = await call(api.url, "POST", "/mcp", { body: init, headers });
    expect([none.status, none.body.error.code]).toEqual([401, "UNAUTHORIZED"]);
  });

  test("another workspace's run is not found through every tool; its session cannot be borrowed", async () => {
    const a = await connect(api.url, keyA);
    const w = await callTool(a, "run_tool_chain", { plan: oneApproval("doc7") });
    const runId = w.data.runId as string;
    const b = await connect(api.url, keyB);
    for (const [tool, args] of [
      ["get_tool_chain_run", { runId }],
      ["confirm_tool_chain_step", { runId, stepId: "pub", decision: "approve" }],
      ["cancel_tool_chain_run", { runId }],
    ] as const) {
      const r = await callTool(b, tool, args);
      expect([r.result.isError, r.data.error.code], tool).toEqual([true, "RUN_NOT_FOUND"]);
    }
    expect((await callTool(a, "get_tool_chain_run", { runId })).data.status).toBe("waiting_confirmation");
    expect(effectsOf(runId, "pub")).toBe(0);

    // workspace B's key on workspace A's session id: 404, as for an unknown session
    const sessionId = (a.transport as StreamableHTTPServerTransportLike).sessionId!;
    const hijack = await call(api.url, "POST", "/mcp", {
      key: keyB,
      headers: {
        accept: "application/json, text/event-stream",
        "mcp-session-id": sessionId,
        "mcp-protocol-version": "2025-06-18",
      },
      body: {
        jsonrpc: "2.0",
        id: 9,
        method: "tools/call",
        params: { name: "get_tool_chain_run", arguments: { runId } },
      },
    });
    expect(hijack.status).toBe(404);
    await callTool(a, "cancel_tool_chain_run", { runId });
  });

  test("a skill outside the workspace's allowlist is refused before anything runs", async () => {
    const b = await connect(api.url, keyB);
    const r = await callTool(b, "run_tool_chain", { plan: oneApproval("doc8") });
    expect(r.result.isError).toBe(true);
    expect(r.data.error.code).toBe("SKILL_NOT_ALLOWED");
    expect(r.data.error.message).toContain("test.publish");
    const runs = await call(api.url, "GET", "/api/tool-chains/runs", { key: keyB });
    expect(runs.body.runs).toEqual([]);
    // what B may use runs
    const ok = await callTool(b, "run_tool_chain", {
      plan: { steps: [{ stepId: "x", skillName: "core.pass", arguments: { value: 1 } }] },
    });
    expect(ok.data).toMatchObject({ status: "completed", outputs: { x: 1 } });
  });

  test("plan_tool_chain writes a plan (the server's planner, the workspace's skills) and runs nothing", async () => {
    const client = await connect(api.url, keyA);
    const r = await callTool(client, "plan_tool_chain", { request: REQUEST, context: { table: { id: tableId } } });
    expect(r.result.isError).toBeFalsy();
    expect(r.data.planner).toMatchObject({ kind: "fallback", fallbackReason: "not_configured" });
    const skills = r.data.steps.map((s: { skillName: string }) => s.skillName);
    expect(skills).toEqual(
      expect.arrayContaining([
        "qtable.task.split",
        "qtable.task.estimate",
        "qtable.gantt.generate",
        "qtable.task.records.create",
      ]),
    );
    expect(
      r.data.steps.find((s: { skillName: string }) => s.skillName === "qtable.task.records.create")
        .requiresConfirmation,
    ).toBe(true);
    expect(r.text).toContain("not run yet");
    expect((await tables.listRecords("ws-mcp-a", tableId))!.records).toHaveLength(0);
    expect(
      (await call(api.url, "GET", "/api/tool-chains/runs?limit=100", { key: keyA })).body.runs.every(
        (x: { goal: string | null }) => !x.goal?.includes("approval system"),
      ),
    ).toBe(true);
    // workspace B may not use the QTable skills: the planner cannot write a plan for it
    const b = await connect(api.url, keyB);
    const refused = await callTool(b, "plan_tool_chain", { request: REQUEST, context: { table: { id: tableId } } });
    expect([refused.result.isError, refused.data.error.code]).toEqual([true, "PLANNING_FAILED"]);
  });

  test("run_tool_chain from a request: planned, run, the table write confirmed through elicitation, records created once", async () => {
    const asked: string[] = [];
    const client = await connect(api.url, keyA, { elicit: (q) => (asked.push(q.message), { action: "accept" }) });
    const r = await callTool(
      client,
      "run_tool_chain",
      { request: REQUEST, context: { table: { id: tableId } } },
      { progress: true },
    );
    expect(r.data.status).toBe("completed");
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain("qtable.task.records.create");
    const records = r.data.steps.find((s: { skillName: string }) => s.skillName === "qtable.task.records.create");
    expect(records.status).toBe("completed");
    // exactly the records the one write created (the table was empty before)
    const created = (await tables.listRecords("ws-mcp-a", tableId, { limit: 1000 }))!.records;
    expect(records.output.recordIds.length).toBeGreaterThan(0);
    expect(created.map((x) => x.id).sort()).toEqual([...records.output.recordIds].sort());
    // progress learnt the plan's size from the planner
    expect(r.progress.at(-1)).toMatchObject({ total: 2 * r.data.steps.length, progress: 2 * r.data.steps.length });
  });

  test("bad input is a tool error naming the field", async () => {
    const client = await connect(api.url, keyA);
    const both = await client.callTool({ name: "run_tool_chain", arguments: { request: "x", plan: oneApproval("y") } });
    expect(both.isError).toBe(true);
    expect(JSON.stringify(both.content)).toContain("exactly one of `request` or `plan`");
    const cycle = await callTool(client, "run_tool_chain", {
      plan: {
        steps: [
          { stepId: "a", skillName: "core.pass", dependsOn: ["b"] },
          { stepId: "b", skillName: "core.pass", dependsOn: ["a"] },
        ],
      },
    });
    expect(cycle.data.error.code).toBe("PLAN_CYCLE");
    const unknown = await callTool(client, "get_tool_chain_run", { runId: "no-such-run" });
    expect(unknown.data.error.code).toBe("RUN_NOT_FOUND");
    const badDecision = await client.callTool({
      name: "confirm_tool_chain_step",
      arguments: { runId: "r", stepId: "s", decision: "maybe" },
    });
    expect(badDecision.isError).toBe(true);
    expect(JSON.stringify(badDecision.content)).toContain("decision");
  });
});

type StreamableHTTPServerTransportLike = { sessionId?: string };
