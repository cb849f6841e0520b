/**
 * Chains as LangChain tools in real LangGraph agents: a StateGraph running LangGraph's ToolNode
 * (MemorySaver) and an agent from `createAgent` (PostgresSaver on the database under test), with
 * the model's tool calls scripted by `fakeModel()`. The runtime is the durable one (embedded
 * PGlite, or DATABASE_URL). Effects are counted per run and step; runs are counted per workspace.
 */
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { fakeModel } from "@langchain/core/testing";
import {
  Command,
  END,
  MemorySaver,
  MessagesAnnotation,
  START,
  StateGraph,
  type BaseCheckpointSaver,
} from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { createAgent } from "langchain";
import { convertToOpenAITool } from "@langchain/core/utils/function_calling";
import { planToolChainTool, RUN_TOOL_CHAIN_DESCRIPTION } from "../src/tools/definitions.js";
import {
  coreSkills,
  createToolChainTools,
  Planner,
  SkillRegistry,
  toolCallRunId,
  type ToolChainInterrupt,
} from "../src/index.js";
import { openRuntime, type OpenedRuntime } from "../src/runtime/open.js";
import { Runtime } from "../src/runtime/runtime.js";
import { PgRunStore } from "../src/store/pg-run-store.js";
import { PgLimits } from "../src/store/limits-store.js";
import { freshSchema, serverUrl } from "./helpers/backends.js";
import { nodeArgs } from "./helpers/prebuilt.js";
import { approvalSkill, EffectLedger, effectSkill } from "./helpers/skills.js";
import { startMockOpenAi } from "./helpers/openai-mock.js";

type Tools = ReturnType<typeof createToolChainTools>;
type Invoke = (input: unknown) => Promise<{ messages: BaseMessage[]; __interrupt__?: { value: unknown }[] }>;

const oneApproval = (title: string) => ({
  goal: `publish ${title}`,
  steps: [
    { stepId: "prep", skillName: "core.pass", arguments: { value: title } },
    { stepId: "pub", skillName: "test.publish", dependsOn: ["prep"], arguments: { title: { $ref: "steps.prep" } } },
  ],
});
/** prep → pubA, pubB (both wait at once) → after */
const twoApprovals = (title: string) => ({
  goal: `publish ${title} twice`,
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
/** an effect, an approved publish, then a failure: fail_fast compensates both */
const failsAfterApproval = (title: string) => ({
  goal: `publish ${title}, then fail`,
  onFailure: "fail_fast",
  steps: [
    { stepId: "write", skillName: "test.effect", arguments: { label: title } },
    { stepId: "pub", skillName: "test.publish", dependsOn: ["write"], arguments: { title } },
    { stepId: "boom", skillName: "core.fail", dependsOn: ["pub"], arguments: {}, retry: { maxAttempts: 1 } },
  ],
});

const lastToolJson = (messages: BaseMessage[]) => {
  const t = [...messages].reverse().find((m) => ToolMessage.isInstance(m));
  return JSON.parse(String(t!.content)) as Record<string, any>;
};
const callTool = (name: string, args: Record<string, unknown>, id: string) =>
  new AIMessage({ content: "", tool_calls: [{ name, args, id, type: "tool_call" }] });
const model4Schemas = (tools: Tools) =>
  Object.fromEntries(
    tools.map((t) => [
      t.name,
      convertToOpenAITool(t).function.parameters as { properties: Record<string, unknown>; required?: string[] },
    ]),
  );
const interruptsOf = (out: { __interrupt__?: { value: unknown }[] }) =>
  (out.__interrupt__ ?? []).map((i) => i.value as ToolChainInterrupt);

describe(`chains as agent tools on ${serverUrl ? "postgres-server" : "postgres-embedded"}`, () => {
  let o: OpenedRuntime;
  let schema: string;
  let ledger: EffectLedger;
  let registry: SkillRegistry;
  /** request text → the plan the scripted planner model writes for it */
  const scripted = new Map<string, unknown>();

  beforeAll(async () => {
    ledger = new EffectLedger();
    registry = new SkillRegistry([...coreSkills, approvalSkill(ledger), effectSkill(ledger)]);
    const planner = new Planner({
      registry,
      model: {
        model: "scripted",
        async propose(messages) {
          const text = messages.map((m) => m.content).join("\n");
          const hit = [...scripted.entries()].find(([request]) => text.includes(request));
          return { plan: hit?.[1] ?? { steps: [] } };
        },
      },
    });
    schema = freshSchema("agent");
    o = await openRuntime({
      skills: registry,
      planner,
      qtable: false,
      databaseUrl: serverUrl,
      dataDir: ":memory:",
      schema,
      poolSize: 4,
    });
  });
  afterAll(async () => {
    if (!o) return;
    await o.runtime.drain();
    if (o.db.kind === "server") await o.db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
    await o.close();
  });

  const effects = (runId: string, stepId: string) => ledger.effects.get(`${runId}:${stepId}`) ?? 0;
  const undos = (runId: string, stepId: string) => ledger.compensations.get(`${runId}:${stepId}:compensate`) ?? 0;
  const runsIn = async (workspaceId: string) =>
    Number(
      (
        await o.db.pool.query(`SELECT count(*)::int AS n FROM "${schema}".tool_chain_runs WHERE workspace_id = $1`, [
          workspaceId,
        ])
      ).rows[0].n,
    );

  /** The two ways an agent meets the tools: LangGraph's ToolNode in a StateGraph, and createAgent. */
  const graphs: { name: string; build(model: ReturnType<typeof fakeModel>, tools: Tools): Invoke }[] = [
    {
      name: "ToolNode in a StateGraph (MemorySaver)",
      build(model, tools) {
        const bound = model.bindTools([...tools]);
        const g = new StateGraph(MessagesAnnotation)
          .addNode("agent", async (s) => ({ messages: [await bound.invoke(s.messages)] }))
          .addNode("tools", new ToolNode([...tools]))
          .addEdge(START, "agent")
          .addConditionalEdges("agent", (s) => ((s.messages.at(-1) as AIMessage).tool_calls?.length ? "tools" : END))
          .addEdge("tools", "agent")
          .compile({ checkpointer: new MemorySaver() });
        const config = { configurable: { thread_id: `tn-${freshSchema()}` } };
        return (input) => g.invoke(input as never, config) as never;
      },
    },
    {
      name: "createAgent (PostgresSaver)",
      build(model, tools) {
        const checkpointer: BaseCheckpointSaver = new PostgresSaver(o.db.pool, undefined, { schema });
        const agent = createAgent({ model, tools: [...tools], checkpointer });
        const config = { configurable: { thread_id: `ca-${freshSchema()}` } };
        return (input) => agent.invoke(input as never, config) as never;
      },
    },
  ];

  for (const g of graphs) {
    describe(g.name, () => {
      test("plan → run → confirmation interrupt → resume → answer; the effect happens once, one run exists", async () => {
        const ws = `ws-flow-${freshSchema()}`;
        const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
        const request = `publish the launch note ${ws}`;
        scripted.set(request, oneApproval("launch note"));
        const model = fakeModel()
          .respondWithTools([{ name: "plan_tool_chain", args: { request }, id: "call_plan" }])
          .respond((messages) => callTool("run_tool_chain", { plan: lastToolJson(messages).plan }, "call_run"))
          .respond((messages) => new AIMessage(`The chain ended ${lastToolJson(messages).status}.`));
        const invoke = g.build(model, tools);

        const first = await invoke({ messages: [new HumanMessage(request)] });
        const [ask] = interruptsOf(first);
        expect(interruptsOf(first)).toHaveLength(1);
        expect(ask).toMatchObject({
          type: "tool_chain_confirmation",
          tool: "run_tool_chain",
          goal: "publish launch note",
          pending: [
            {
              stepId: "pub",
              skillName: "test.publish",
              arguments: { title: "launch note" },
              preview: { willPublish: "launch note" },
              kind: "confirmation",
              round: 0,
              decisions: ["approve", "reject"],
            },
          ],
          resume: { example: { decisions: { pub: { decision: "approve" } } } },
        });
        expect(ask!.resume.shape).toContain("decisions");
        expect(ask!.resumeError).toBeUndefined();
        const runId = ask!.runId;
        // the plan the model saw came from the planner, and the tool ran it in this workspace
        expect((await o.runtime.store.getRow(runId))!.workspaceId).toBe(ws);
        expect(effects(runId, "pub")).toBe(0);
        // the runtime's own view of the run, outside the agent, agrees (its graph did not run in the agent's namespace)
        expect((await o.runtime.getRun(runId)).status).toBe("waiting_confirmation");

        const done = await invoke(
          new Command({ resume: { decisions: { pub: { decision: "approve", comment: "looks right" } } } }),
        );
        expect(interruptsOf(done)).toEqual([]);
        const answer = lastToolJson(done.messages);
        expect(answer).toMatchObject({
          runId,
          status: "completed",
          pending: [],
          outputs: { pub: { published: "launch note" } },
        });
        expect(done.messages.at(-1)!.content).toBe("The chain ended completed.");
        // the model read the tool's result
        expect(String(model.calls.at(-1)!.messages.at(-1)!.content)).toContain('"status":"completed"');
        expect(effects(runId, "pub")).toBe(1);
        expect(await runsIn(ws)).toBe(1);
        const decided = (await o.runtime.events(runId)).find((e) => e.type === "step_confirmed");
        expect(decided?.data).toMatchObject({ decision: "approve" });
      });

      test("two waiting steps answered one at a time: the approved one runs while the other still waits", async () => {
        const ws = `ws-two-${freshSchema()}`;
        const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
        const model = fakeModel()
          .respondWithTools([{ name: "run_tool_chain", args: { plan: twoApprovals("doc") }, id: "call_two" }])
          .respond((messages) => new AIMessage(`done: ${lastToolJson(messages).status}`));
        const invoke = g.build(model, tools);

        const first = interruptsOf(await invoke({ messages: [new HumanMessage("publish doc twice")] }));
        expect(first[0]!.pending.map((p) => p.stepId).sort()).toEqual(["pubA", "pubB"]);
        const runId = first[0]!.runId;

        const second = interruptsOf(
          await invoke(new Command({ resume: { decisions: { pubA: { decision: "approve" } } } })),
        );
        expect(second).toHaveLength(1);
        expect(second[0]!.pending.map((p) => p.stepId)).toEqual(["pubB"]);
        expect(second[0]!.steps.find((s) => s.stepId === "pubA")).toMatchObject({ status: "completed" });
        expect(effects(runId, "pubA")).toBe(1);
        expect(effects(runId, "pubB")).toBe(0);

        const done = await invoke(new Command({ resume: { decisions: { pubB: { decision: "approve" } } } }));
        expect(interruptsOf(done)).toEqual([]);
        expect(lastToolJson(done.messages)).toMatchObject({
          runId,
          status: "completed",
          outputs: { after: { a: "doc", b: "doc-b" } },
        });
        expect([effects(runId, "pubA"), effects(runId, "pubB")]).toEqual([1, 1]);
        expect(await runsIn(ws)).toBe(1);
      });

      test("two waiting steps answered together, one with corrected arguments", async () => {
        const ws = `ws-both-${freshSchema()}`;
        const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
        const model = fakeModel()
          .respondWithTools([{ name: "run_tool_chain", args: { plan: twoApprovals("memo") }, id: "call_both" }])
          .respond((messages) => new AIMessage(`done: ${lastToolJson(messages).status}`));
        const invoke = g.build(model, tools);
        const [ask] = interruptsOf(await invoke({ messages: [new HumanMessage("publish memo twice")] }));
        const done = await invoke(
          new Command({
            resume: {
              decisions: {
                pubA: { decision: "approve" },
                pubB: { decision: "approve", arguments: { title: "memo-fixed" } },
              },
            },
          }),
        );
        expect(interruptsOf(done)).toEqual([]);
        expect(lastToolJson(done.messages)).toMatchObject({
          status: "completed",
          outputs: { after: { a: "memo", b: "memo-fixed" } },
        });
        expect([effects(ask!.runId, "pubA"), effects(ask!.runId, "pubB")]).toEqual([1, 1]);
      });

      test("a rejection reaches the model as the tool's result, not as an exception", async () => {
        const ws = `ws-reject-${freshSchema()}`;
        const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
        const model = fakeModel()
          .respondWithTools([{ name: "run_tool_chain", args: { plan: oneApproval("draft") }, id: "call_rej" }])
          .respond(
            (messages) =>
              new AIMessage(
                `not published: ${lastToolJson(messages).steps.find((s: { stepId: string }) => s.stepId === "pub").error.code}`,
              ),
          );
        const invoke = g.build(model, tools);
        const [ask] = interruptsOf(await invoke({ messages: [new HumanMessage("publish the draft")] }));
        const done = await invoke(
          new Command({ resume: { decisions: { pub: { decision: "reject", comment: "not yet" } } } }),
        );
        const seen = model.calls.at(-1)!.messages.at(-1)!;
        expect(ToolMessage.isInstance(seen)).toBe(true);
        expect((seen as ToolMessage).status).toBe("success");
        const result = JSON.parse(String(seen.content));
        expect(result).toMatchObject({ runId: ask!.runId, status: "failed", pending: [] });
        expect(result.steps.find((s: { stepId: string }) => s.stepId === "pub")).toMatchObject({
          status: "failed",
          error: { code: "REJECTED" },
        });
        expect(done.messages.at(-1)!.content).toBe("not published: REJECTED");
        expect(effects(ask!.runId, "pub")).toBe(0);
      });

      test("a chain that fails after an approval is compensated, and the model sees rolled_back and the error", async () => {
        const ws = `ws-comp-${freshSchema()}`;
        const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
        const model = fakeModel()
          .respondWithTools([{ name: "run_tool_chain", args: { plan: failsAfterApproval("notes") }, id: "call_comp" }])
          .respond((messages) => new AIMessage(`chain ${lastToolJson(messages).status}`));
        const invoke = g.build(model, tools);
        const [ask] = interruptsOf(await invoke({ messages: [new HumanMessage("publish notes")] }));
        const runId = ask!.runId;
        expect(effects(runId, "write")).toBe(1);
        const done = await invoke(new Command({ resume: { decisions: { pub: { decision: "approve" } } } }));
        const result = lastToolJson(done.messages);
        expect(result).toMatchObject({ runId, status: "rolled_back", error: { code: "EXECUTION_FAILED" } });
        const step = (id: string) => result.steps.find((s: { stepId: string }) => s.stepId === id);
        expect(step("boom")).toMatchObject({ status: "failed", error: { code: "EXECUTION_FAILED" } });
        expect(step("pub").status).toBe("rolled_back");
        expect(step("write").status).toBe("rolled_back");
        expect(done.messages.at(-1)!.content).toBe("chain rolled_back");
        expect([effects(runId, "write"), effects(runId, "pub"), undos(runId, "write"), undos(runId, "pub")]).toEqual([
          1, 1, 1, 1,
        ]);
      });

      test("a resume value that does not parse is refused with resumeError and nothing is applied; the tool re-runs without a second chain", async () => {
        const ws = `ws-bad-${freshSchema()}`;
        const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
        const model = fakeModel()
          .respondWithTools([{ name: "run_tool_chain", args: { plan: oneApproval("bad") }, id: "call_bad" }])
          .respond((messages) => new AIMessage(`done: ${lastToolJson(messages).status}`));
        const invoke = g.build(model, tools);
        const [ask] = interruptsOf(await invoke({ messages: [new HumanMessage("publish bad")] }));
        const runId = ask!.runId;
        const bad: [unknown, string, RegExp][] = [
          ["approve", "INVALID_DECISION", /does not match/],
          [
            { decisions: { nope: { decision: "approve" } } },
            "CONFIRMATION_NOT_PENDING",
            /step "nope" is not waiting.*waiting: pub/,
          ],
          [{ decisions: { pub: { decision: "yes" } } }, "INVALID_DECISION", /decision/],
          [
            { decisions: { pub: { decision: "mark_done" } } },
            "INVALID_DECISION",
            /confirmation decision: approve, reject; got mark_done/,
          ],
          [{ decisions: {} }, "INVALID_DECISION", /no decisions/],
        ];
        for (const [value, code, message] of bad) {
          const again = interruptsOf(await invoke(new Command({ resume: value })));
          expect(again, JSON.stringify(value)).toHaveLength(1);
          expect(again[0]).toMatchObject({ runId, pending: [{ stepId: "pub", round: 0 }], resumeError: { code } });
          expect(again[0]!.resumeError!.message).toMatch(message);
          expect((await o.runtime.getRun(runId)).status).toBe("waiting_confirmation");
        }
        // corrected arguments that fail the skill's schema: refused by the runtime's confirm, asked again
        const wrongArgs = interruptsOf(
          await invoke(
            new Command({ resume: { decisions: { pub: { decision: "approve", arguments: { title: 42 } } } } }),
          ),
        );
        expect(wrongArgs[0]).toMatchObject({
          runId,
          pending: [{ stepId: "pub" }],
          resumeError: { code: "INVALID_ARGUMENTS" },
        });
        expect(effects(runId, "pub")).toBe(0);
        const done = await invoke(new Command({ resume: { decisions: { pub: { decision: "approve" } } } }));
        expect(lastToolJson(done.messages)).toMatchObject({ runId, status: "completed" });
        // seven resumes re-executed the tool seven times: one chain, one effect
        expect(effects(runId, "pub")).toBe(1);
        expect(await runsIn(ws)).toBe(1);
      });

      test("a run started from a request: the chain's planner writes the plan inside the run", async () => {
        const ws = `ws-req-${freshSchema()}`;
        const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
        const request = `publish the release ${ws}`;
        scripted.set(request, oneApproval("release"));
        const model = fakeModel()
          .respondWithTools([{ name: "run_tool_chain", args: { request }, id: "call_req" }])
          .respond((messages) => new AIMessage(`done: ${lastToolJson(messages).status}`));
        const invoke = g.build(model, tools);
        const [ask] = interruptsOf(await invoke({ messages: [new HumanMessage(request)] }));
        expect(ask).toMatchObject({ pending: [{ stepId: "pub", arguments: { title: "release" } }] });
        const done = await invoke(new Command({ resume: { decisions: { pub: { decision: "approve" } } } }));
        expect(lastToolJson(done.messages)).toMatchObject({ status: "completed" });
        expect(effects(ask!.runId, "pub")).toBe(1);
        expect(await runsIn(ws)).toBe(1);
      });
    });
  }

  test("an agent run that dies while its chain runs is continued from its checkpoint: the re-executed tool follows the same run", async () => {
    const ws = `ws-abort-${freshSchema()}`;
    const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
    const plan = {
      steps: [
        { stepId: "slow", skillName: "test.effect", arguments: { label: "slow", ms: 1_500 } },
        {
          stepId: "after",
          skillName: "core.pass",
          dependsOn: ["slow"],
          arguments: { value: { $ref: "steps.slow.label" } },
        },
      ],
    };
    const model = fakeModel()
      .respondWithTools([{ name: "run_tool_chain", args: { plan }, id: "call_slow" }])
      .respond((messages) => new AIMessage(`done: ${lastToolJson(messages).status}`));
    const checkpointer = new PostgresSaver(o.db.pool, undefined, { schema });
    const agent = createAgent({ model, tools: [...tools], checkpointer });
    const threadId = `abort-${freshSchema()}`;
    // the agent's process "dies" (its invocation is aborted) while the chain's slow step runs
    const stop = new AbortController();
    // durability "sync": the agent's model step is checkpointed before its tool runs, so the process
    // dies after it (with the default "async" a fast chain could start before that checkpoint
    // committed on a loaded Postgres; the scripted model's first answer would then be asked again)
    const first = agent.invoke(
      { messages: [new HumanMessage("run the slow chain")] },
      { configurable: { thread_id: threadId }, signal: stop.signal, durability: "sync" },
    );
    const runId = toolCallRunId(ws, threadId, "call_slow");
    for (let i = 0; i < 200 && effects(runId, "slow") === 0; i++) await new Promise((r) => setTimeout(r, 25));
    expect(effects(runId, "slow")).toBe(1);
    stop.abort(new Error("agent process stopped"));
    await expect(first).rejects.toThrow();
    // continued from the checkpoint: LangGraph runs the tool again from its start
    const done = (await agent.invoke(null as never, { configurable: { thread_id: threadId } })) as {
      messages: BaseMessage[];
    };
    expect(lastToolJson(done.messages)).toMatchObject({ runId, status: "completed", outputs: { after: "slow" } });
    expect(done.messages.at(-1)!.content).toBe("done: completed");
    expect(effects(runId, "slow")).toBe(1);
    expect(await runsIn(ws)).toBe(1);
  });

  test("cancel through the resume value compensates and answers the model", async () => {
    const ws = `ws-cancel-${freshSchema()}`;
    const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
    const model = fakeModel()
      .respondWithTools([
        { name: "run_tool_chain", args: { plan: failsAfterApproval("cancelled") }, id: "call_cancel" },
      ])
      .respond((messages) => new AIMessage(`chain ${lastToolJson(messages).status}`));
    const invoke = graphs[1]!.build(model, tools);
    const [ask] = interruptsOf(await invoke({ messages: [new HumanMessage("publish, then maybe cancel")] }));
    const done = await invoke(new Command({ resume: { cancel: true, reason: "changed my mind" } }));
    expect(lastToolJson(done.messages)).toMatchObject({
      runId: ask!.runId,
      status: "cancelled",
      error: { code: "CANCELLED", message: "changed my mind" },
    });
    expect([effects(ask!.runId, "write"), undos(ask!.runId, "write"), effects(ask!.runId, "pub")]).toEqual([1, 1, 0]);
  });

  test("a step answered elsewhere meanwhile: the stale decision is refused (resumeError), the other step is asked again", async () => {
    const ws = `ws-elsewhere-${freshSchema()}`;
    const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
    const model = fakeModel()
      .respondWithTools([{ name: "run_tool_chain", args: { plan: twoApprovals("shared") }, id: "call_elsewhere" }])
      .respond((messages) => new AIMessage(`done: ${lastToolJson(messages).status}`));
    const invoke = graphs[0]!.build(model, tools);
    const [ask] = interruptsOf(await invoke({ messages: [new HumanMessage("publish shared twice")] }));
    const runId = ask!.runId;
    // someone approves pubA through the API (same durable path) while the agent's question is open
    await (
      await o.runtime.confirm(runId, { stepId: "pubA", decision: "approve", round: 0 })
    ).result;
    expect(effects(runId, "pubA")).toBe(1);
    // the agent's user, looking at the old question, rejects pubA: too late for that wait
    const again = interruptsOf(await invoke(new Command({ resume: { decisions: { pubA: { decision: "reject" } } } })));
    expect(again).toHaveLength(1);
    expect(again[0]).toMatchObject({
      runId,
      pending: [{ stepId: "pubB" }],
      resumeError: { code: "CONFIRMATION_NOT_PENDING" },
    });
    expect(again[0]!.steps.find((s) => s.stepId === "pubA")).toMatchObject({ status: "completed" });
    const done = await invoke(new Command({ resume: { decisions: { pubB: { decision: "approve" } } } }));
    expect(lastToolJson(done.messages)).toMatchObject({ runId, status: "completed" });
    expect([effects(runId, "pubA"), effects(runId, "pubB")]).toEqual([1, 1]);
  });

  test("createAgent: two chains started in one model turn wait together; each answer names its run", async () => {
    const ws = `ws-pair-${freshSchema()}`;
    const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
    const model = fakeModel()
      .respondWithTools([
        { name: "run_tool_chain", args: { plan: oneApproval("left") }, id: "call_left" },
        { name: "run_tool_chain", args: { plan: oneApproval("right") }, id: "call_right" },
      ])
      .respond(() => new AIMessage("both done"));
    const invoke = graphs[1]!.build(model, tools);
    const first = await invoke({ messages: [new HumanMessage("publish left and right")] });
    // createAgent runs each tool call as its own LangGraph task: both questions are open at once
    const open = (first.__interrupt__ ?? []) as { id: string; value: ToolChainInterrupt }[];
    expect(
      open.map((i) => i.value.pending[0]!.arguments).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
    ).toEqual([{ title: "left" }, { title: "right" }]);
    const byTitle = (t: string) => open.find((i) => (i.value.pending[0]!.arguments as { title: string }).title === t)!;
    const left = byTitle("left").value.runId;
    const right = byTitle("right").value.runId;
    // an answer that does not name its run is refused (both chains have a step "pub"); nothing is applied
    const second = (
      await invoke(new Command({ resume: { [byTitle("left").id]: { decisions: { pub: { decision: "approve" } } } } }))
    ).__interrupt__ as typeof open;
    expect(second.map((i) => i.value.runId).sort()).toEqual([left, right].sort());
    expect(second.find((i) => i.value.runId === left)!.value.resumeError).toMatchObject({ code: "INVALID_DECISION" });
    expect(effects(left, "pub")).toBe(0);
    const ids = Object.fromEntries(second.map((i) => [i.value.runId, i.id]));
    const done = await invoke(
      new Command({
        resume: {
          [ids[left]!]: { runId: left, decisions: { pub: { decision: "approve" } } },
          [ids[right]!]: { runId: right, decisions: { pub: { decision: "reject" } } },
        },
      }),
    );
    expect(interruptsOf(done)).toEqual([]);
    const results = done.messages.filter((m) => ToolMessage.isInstance(m)).map((m) => JSON.parse(String(m.content)));
    expect(results.find((r) => r.runId === left)).toMatchObject({
      status: "completed",
      outputs: { pub: { published: "left" } },
    });
    expect(results.find((r) => r.runId === right)).toMatchObject({ status: "failed" });
    expect([effects(left, "pub"), effects(right, "pub")]).toEqual([1, 0]);
    expect(await runsIn(ws)).toBe(2);
  });

  test("ToolNode: two chains started in one model turn share its task; they are asked one after the other and answers name their run", async () => {
    const ws = `ws-pairtn-${freshSchema()}`;
    const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
    const model = fakeModel()
      .respondWithTools([
        { name: "run_tool_chain", args: { plan: oneApproval("north") }, id: "call_north" },
        { name: "run_tool_chain", args: { plan: oneApproval("south") }, id: "call_south" },
      ])
      .respond(() => new AIMessage("both done"));
    const invoke = graphs[0]!.build(model, tools);
    let asks = interruptsOf(await invoke({ messages: [new HumanMessage("publish north and south")] }));
    const decided = new Map<string, string>();
    for (let round = 0; asks.length && round < 8; round++) {
      const ask = asks[0]!;
      const title = (ask.pending[0]!.arguments as { title: string }).title;
      decided.set(ask.runId, title);
      asks = interruptsOf(
        await invoke(
          new Command({
            resume: { runId: ask.runId, decisions: { pub: { decision: title === "north" ? "approve" : "reject" } } },
          }),
        ),
      );
    }
    expect(asks).toEqual([]);
    expect([...decided.values()].sort()).toEqual(["north", "south"]);
    const [north, south] = ["north", "south"].map((t) => [...decided.entries()].find(([, v]) => v === t)![0]);
    expect([effects(north!, "pub"), effects(south!, "pub")]).toEqual([1, 0]);
    expect((await o.runtime.getRun(north!)).status).toBe("completed");
    expect((await o.runtime.getRun(south!)).status).toBe("failed");
    expect(await runsIn(ws)).toBe(2);
  });

  describe("outside a graph", () => {
    test("answers at once with the waiting run, its pending steps and how to confirm", async () => {
      const ws = `ws-out-${freshSchema()}`;
      const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
      const out = (await tools.runToolChain.invoke({ plan: oneApproval("outside") })) as Record<string, any>;
      expect(out).toMatchObject({
        status: "waiting_confirmation",
        pending: [{ stepId: "pub", preview: { willPublish: "outside" }, round: 0 }],
      });
      expect(out.how).toContain(`/api/tool-chains/runs/${out.runId}/confirm`);
      expect(out.how).toContain("confirm_tool_chain_step");
      expect((await o.runtime.store.getRow(out.runId))!.workspaceId).toBe(ws);
      const after = await (
        await o.runtime.confirm(out.runId, { stepId: "pub", decision: "approve", round: out.pending[0].round })
      ).result;
      expect(after.status).toBe("completed");
      expect(effects(out.runId, "pub")).toBe(1);
    });

    test("the same tool call on the same thread continues its run instead of starting another, also when two race", async () => {
      const ws = `ws-same-${freshSchema()}`;
      const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
      const plan = {
        steps: [
          { stepId: "write", skillName: "test.effect", arguments: { label: "once" } },
          { stepId: "pub", skillName: "test.publish", dependsOn: ["write"], arguments: { title: "once" } },
        ],
      };
      const call = (id: string) => ({ type: "tool_call" as const, id, name: "run_tool_chain", args: { plan } });
      const config = { configurable: { thread_id: "thread-same" } };
      const parse = (m: unknown) => JSON.parse(String((m as ToolMessage).content)) as Record<string, any>;

      const a = parse(await tools.runToolChain.invoke(call("call_same"), config));
      const b = parse(await tools.runToolChain.invoke(call("call_same"), config));
      expect(a.runId).toBe(toolCallRunId(ws, "thread-same", "call_same"));
      expect(b).toMatchObject({ runId: a.runId, status: "waiting_confirmation", pending: [{ stepId: "pub" }] });
      expect(effects(a.runId, "write")).toBe(1);

      const racing = (await Promise.all([0, 1, 2].map(() => tools.runToolChain.invoke(call("call_race"), config)))).map(
        parse,
      );
      expect(new Set(racing.map((r) => r.runId)).size).toBe(1);
      for (const r of racing) expect(r).toMatchObject({ status: "waiting_confirmation", pending: [{ stepId: "pub" }] });
      expect(effects(racing[0]!.runId, "write")).toBe(1);
      expect(await runsIn(ws)).toBe(2);

      // two processes (runtimes with their own owner on the same database) race on one tool call:
      // the loser's insert of the run row fails and it follows the winner's run
      const limitsB = new PgLimits(o.db, { owner: "process-b" });
      const processB = new Runtime({
        skills: registry,
        checkpointer: new PostgresSaver(o.db.pool, undefined, { schema }),
        store: new PgRunStore(o.db),
        owner: "process-b",
        limits: limitsB,
      });
      try {
        const toolsB = createToolChainTools({ runtime: processB, workspaceId: ws });
        const both = (
          await Promise.all([
            tools.runToolChain.invoke(call("call_two_processes"), config),
            toolsB.runToolChain.invoke(call("call_two_processes"), config),
          ])
        ).map(parse);
        expect(both[0]!.runId).toBe(both[1]!.runId);
        for (const r of both) expect(r).toMatchObject({ status: "waiting_confirmation", pending: [{ stepId: "pub" }] });
        expect(effects(both[0]!.runId, "write")).toBe(1);
        expect(await runsIn(ws)).toBe(3);
        const row = (await o.runtime.store.getRow(both[0]!.runId))!;
        expect(row).toMatchObject({ status: "waiting_confirmation", leaseOwner: null, driveFailures: 0 });
      } finally {
        await processB.drain();
        await limitsB.close();
      }
    });

    test("the workspace's allowlist applies as in the REST API: a skill outside it is refused with SKILL_NOT_ALLOWED", async () => {
      const ws = `ws-limited-${freshSchema()}`;
      const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws, allowSkill: ["core.*"] });
      const refused = (await tools.runToolChain.invoke({ plan: oneApproval("nope") })) as Record<string, any>;
      expect(refused).toMatchObject({ error: { code: "SKILL_NOT_ALLOWED" } });
      expect(refused.error.message).toContain("test.publish");
      expect(await runsIn(ws)).toBe(0);
      const allowed = (await tools.runToolChain.invoke({
        plan: { steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: 1 } }] },
      })) as Record<string, any>;
      expect(allowed).toMatchObject({ status: "completed", outputs: { a: 1 } });
      // the planner refuses a plan using a skill outside the allowlist (and the fallback cannot plan this request)
      const request = `publish via planner ${ws}`;
      scripted.set(request, oneApproval("planned"));
      const planned = (await tools.planToolChain.invoke({ request })) as Record<string, any>;
      expect(planned).toMatchObject({ error: { code: "PLANNING_FAILED" } });
      expect(planned.error.message).toContain("SKILL_NOT_ALLOWED");
    });

    test("the tools a model is offered: the shared names, descriptions and input schemas", async () => {
      const tools = createToolChainTools({ runtime: o.runtime });
      expect(tools.map((t) => t.name)).toEqual(["plan_tool_chain", "run_tool_chain"]);
      expect(tools.planToolChain.description).toBe(planToolChainTool.description);
      expect(tools.runToolChain.description.startsWith(RUN_TOOL_CHAIN_DESCRIPTION)).toBe(true);
      expect(tools.runToolChain.description).not.toContain("confirm_tool_chain_step"); // no such tool here
      // what a chat model receives when the tools are bound (OpenAI function format)
      const bound = model4Schemas(tools) as Record<
        "plan_tool_chain" | "run_tool_chain",
        { properties: Record<string, unknown>; required?: string[] }
      >;
      expect(Object.keys(bound.plan_tool_chain.properties).sort()).toEqual(["context", "request"]);
      expect(bound.plan_tool_chain.required).toEqual(["request"]);
      expect(Object.keys(bound.run_tool_chain.properties).sort()).toEqual(["context", "memory", "plan", "request"]);
      expect(JSON.stringify(bound.run_tool_chain.properties.plan)).toContain("dependsOn");
      // arguments that do not match are refused before anything runs
      await expect(tools.runToolChain.invoke({ request: "x", plan: { steps: [] } } as never)).rejects.toThrow(
        /exactly one of `request` or `plan`/,
      );
    });

    test("plan_tool_chain answers a plan for review and runs nothing", async () => {
      const ws = `ws-plan-${freshSchema()}`;
      const tools = createToolChainTools({ runtime: o.runtime, workspaceId: ws });
      const request = `review before publishing ${ws}`;
      scripted.set(request, oneApproval("review"));
      const out = (await tools.planToolChain.invoke({ request })) as Record<string, any>;
      expect(out).toMatchObject({
        planner: { kind: "llm", model: "scripted" },
        steps: [
          { stepId: "prep", requiresConfirmation: false },
          { stepId: "pub", requiresConfirmation: true },
        ],
      });
      expect(out.plan.steps).toHaveLength(2);
      expect(await runsIn(ws)).toBe(0);
    });
  });

  test("examples/agent.ts, run as a user runs it, against an OpenAI-compatible server: the chain's confirmation is asked and the agent answers", async () => {
    const mock = await startMockOpenAi();
    try {
      const request =
        "Plan an approval system with e-mail notifications, estimate the effort, build a timeline and put the tasks into the current table";
      mock.script(
        { name: "run_tool_chain", toolCall: { request, context: { table: { id: "Tasks" }, startDate: "2026-12-21" } } },
        { content: "The tasks are in the Tasks table." },
      );
      const child = spawn(process.execPath, [...nodeArgs("examples/agent.ts"), "--approve", request], {
        // embedded database in memory; the chain's planner is the deterministic fallback (no planner model)
        env: {
          ...process.env,
          OPENAI_BASE_URL: mock.baseURL,
          OPENAI_API_KEY: "",
          TOOLCHAIN_AGENT_MODEL: "mock-model",
          TOOLCHAIN_PLANNER_MODEL: "",
          DATABASE_URL: "",
          TOOLCHAIN_DATA_DIR: ":memory:",
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      child.stdout.on("data", (d: Buffer) => (out += d));
      child.stderr.on("data", (d: Buffer) => (err += d));
      const code = await new Promise<number | null>((r) => child.on("exit", r));
      expect(code, err).toBe(0);
      expect(out).toContain('waits for a decision on "create" (qtable.task.records.create)');
      expect(out).toContain("The tasks are in the Tasks table.");
      // the model was offered both tools, and read the completed chain as the tool's result
      expect(mock.requests[0]!.tools.map((t: { function: { name: string } }) => t.function.name).sort()).toEqual([
        "plan_tool_chain",
        "run_tool_chain",
      ]);
      const toolMsg = mock.requests[1]!.messages.find((m: { role: string }) => m.role === "tool");
      expect(JSON.parse(toolMsg.content)).toMatchObject({
        status: "completed",
        steps: expect.arrayContaining([expect.objectContaining({ stepId: "create", status: "completed" })]),
      });
    } finally {
      await mock.close();
    }
  }, 120_000);
});
