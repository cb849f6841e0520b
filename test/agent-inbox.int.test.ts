/**
 * LangChain's Agent Inbox as a client, through LangGraph's dev server and SDK the way Agent Inbox
 * calls it: search interrupted threads, read the interrupt's HumanInterrupt fields, resume with
 * HumanResponses. Two confirmations pending in one run (Agent Inbox shows the first interrupt of a
 * thread): edit answers the first with new arguments (validated against the skill), ignore leaves
 * the second waiting, accept approves it. The newer HITL middleware format on the same interrupt:
 * every waiting step as an action request, answered in order by approve / edit / reject.
 */
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

const plan = {
  steps: [
    { stepId: "a", skillName: "core.pass", arguments: { value: 1 }, requireConfirmation: true },
    { stepId: "b", skillName: "core.pass", arguments: { value: 2 }, requireConfirmation: true },
    { stepId: "c", skillName: "core.pass", dependsOn: ["a", "b"], arguments: { value: { $ref: "steps.a" } } },
  ],
};

interface HumanInterrupt {
  action_request: { action: string; args: Record<string, unknown> };
  config: { allow_accept: boolean; allow_edit: boolean; allow_respond: boolean; allow_ignore: boolean };
  description: string;
  actionRequests: { name: string; args: Record<string, unknown>; description: string }[];
  reviewConfigs: { actionName: string; allowedDecisions: string[] }[];
  pending: { stepId: string }[];
  resumeError?: { code: string; message: string };
}

/** What Agent Inbox lists: interrupted threads, and each one's first interrupt value. */
async function inboxItem(threadId: string): Promise<HumanInterrupt | undefined> {
  const threads = await client.threads.search({ status: "interrupted", limit: 100 });
  const t = threads.find((x) => x.thread_id === threadId);
  if (!t?.interrupts) return undefined;
  return Object.values(t.interrupts).flatMap((list) => list.map((i) => i.value as HumanInterrupt))[0];
}
const resume = (threadId: string, value: unknown) =>
  client.runs.wait(threadId, "toolchain", { command: { resume: value } }) as Promise<Record<string, any>>;

describe("Agent Inbox through the LangGraph SDK", () => {
  test("two confirmations in one run: edit approves the first with new arguments, ignore leaves the second waiting, accept approves it", async () => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "toolchain", { input: { plan } });
    const first = await inboxItem(thread.thread_id);
    expect(first).toMatchObject({
      action_request: { action: "core.pass", args: { value: 1 } },
      config: { allow_accept: true, allow_edit: true, allow_respond: false, allow_ignore: true },
    });
    expect(first!.description).toContain("Step `a` of run");
    expect(first!.description).toContain("1 more step of this run waits");
    // our own payload stays beside the fields Agent Inbox reads
    expect(first!.pending.map((p) => p.stepId)).toEqual(["a", "b"]);

    // edited arguments are checked like every decision: refused, nothing applied
    await resume(thread.thread_id, [{ type: "edit", args: { action: "core.pass", args: { nope: 1 } } }]);
    let item = await inboxItem(thread.thread_id);
    expect(item!.resumeError).toMatchObject({ code: "INVALID_ARGUMENTS" });
    expect(item!.resumeError!.message).toContain("core.pass");
    expect(item!.pending.map((p) => p.stepId)).toEqual(["a", "b"]);
    // a text response is not a decision here
    await resume(thread.thread_id, [{ type: "response", args: "sure" }]);
    expect((await inboxItem(thread.thread_id))!.resumeError).toMatchObject({ code: "INVALID_DECISION" });

    await resume(thread.thread_id, [{ type: "edit", args: { action: "core.pass", args: { value: 10 } } }]);
    let st = await client.threads.getState(thread.thread_id);
    let v = st.values as { steps: Record<string, { status: string; output?: unknown }> };
    expect(v.steps.a).toMatchObject({ status: "completed", output: 10 });
    expect(v.steps.b!.status).toBe("waiting_confirmation");
    item = await inboxItem(thread.thread_id);
    expect(item).toMatchObject({ action_request: { action: "core.pass", args: { value: 2 } } });
    expect(item!.resumeError).toBeUndefined();

    // ignore: nothing decided, the step still waits, no error
    await resume(thread.thread_id, [{ type: "ignore", args: null }]);
    item = await inboxItem(thread.thread_id);
    expect(item!.pending.map((p) => p.stepId)).toEqual(["b"]);
    expect(item!.resumeError).toBeUndefined();
    st = await client.threads.getState(thread.thread_id);
    v = st.values as { steps: Record<string, { status: string; output?: unknown }> };
    expect(v.steps.b!.status).toBe("waiting_confirmation");

    const final = await resume(thread.thread_id, [{ type: "accept", args: null }]);
    expect(final.status).toBe("completed");
    expect(final.steps.c.output).toBe(10);
    expect(await inboxItem(thread.thread_id)).toBeUndefined();
  });

  test("HITL middleware format: both steps as action requests; a miscount is refused; edit and reject answer them in order", async () => {
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "toolchain", { input: { plan } });
    const item = await inboxItem(thread.thread_id);
    expect(item!.actionRequests.map((a) => [a.name, a.args])).toEqual([
      ["core.pass", { value: 1 }],
      ["core.pass", { value: 2 }],
    ]);
    expect(item!.reviewConfigs).toEqual([{ actionName: "core.pass", allowedDecisions: ["approve", "edit", "reject"] }]);

    await resume(thread.thread_id, { decisions: [{ type: "approve" }] });
    expect((await inboxItem(thread.thread_id))!.resumeError).toMatchObject({
      code: "INVALID_DECISION",
      message: "decisions: 1 decision for 2 action requests; answer each, in order",
    });
    // edited arguments are validated like every decision
    await resume(thread.thread_id, {
      decisions: [{ type: "edit", editedAction: { name: "core.pass", args: { nope: 1 } } }, { type: "approve" }],
    });
    expect((await inboxItem(thread.thread_id))!.resumeError).toMatchObject({ code: "INVALID_ARGUMENTS" });

    const final = await resume(thread.thread_id, {
      decisions: [
        { type: "edit", editedAction: { name: "core.pass", args: { value: 10 } } },
        { type: "reject", message: "not this one" },
      ],
    });
    expect(final.steps.a).toMatchObject({ status: "completed", output: 10 });
    expect(final.steps.b.error).toMatchObject({ code: "REJECTED", message: "rejected: not this one" });
    expect(final.steps.c.status).toBe("skipped");
    expect(await inboxItem(thread.thread_id)).toBeUndefined();
  });
});
