/**
 * Time travel on one of our runs through LangGraph's dev server and SDK, as Studio does it: a
 * replay from a mid-run checkpoint (`runs.wait` with `checkpointId`) and a fork (`threads.updateState`
 * at that checkpoint, then a run from the new one). LangGraph re-executes every node after the
 * checkpoint; our steps are durable tasks and a non-idempotent step claims its attempt before its
 * effect, so a completed step's effect is never executed again (counted in a file the skill appends
 * to, test/fixtures/fork-graph).
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Client } from "@langchain/langgraph-sdk";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { startLangGraphDev, type LangGraphDev } from "./helpers/langgraph-dev.js";

const effects = path.join(mkdtempSync(path.join(tmpdir(), "tc-fork-")), "effects.log");
writeFileSync(effects, "");
const count = () => readFileSync(effects, "utf8").split("\n").filter(Boolean).length;

let dev: LangGraphDev | undefined;
let client: Client;
beforeAll(async () => {
  dev = await startLangGraphDev({
    config: "test/fixtures/fork-graph/langgraph.json",
    env: { TOOLCHAIN_TEST_EFFECTS: effects },
  });
  client = dev.client;
}, 120_000);
afterAll(() => dev?.stop());

const plan = {
  steps: [
    { stepId: "send", skillName: "t.effect", arguments: { label: "x" } },
    { stepId: "a", skillName: "core.pass", dependsOn: ["send"], arguments: { value: 1 }, requireConfirmation: true },
  ],
};

type Values = { steps?: Record<string, unknown> };
type Pending = { stepId: string; kind: string };

async function pendingOf(threadId: string): Promise<Pending[]> {
  const st = await client.threads.getState(threadId);
  return st.tasks.flatMap((t) => t.interrupts ?? []).flatMap((i) => (i.value as { pending: Pending[] }).pending);
}

describe("time travel on one of our runs through the dev server", () => {
  test("a replay and a fork from the checkpoint before a non-idempotent step completed do not execute its effect again", async () => {
    const thread = await client.threads.create();
    const id = thread.thread_id;
    await client.runs.wait(id, "toolchain", { input: { plan } });
    expect(count()).toBe(1);
    expect((await pendingOf(id)).map((p) => p.stepId)).toEqual(["a"]);

    // the checkpoint the scheduler node starts from: `send` ran inside that node, as a durable task
    const history = await client.threads.getHistory(id, { limit: 50 });
    const mid = history.find((h) => h.next.includes("scheduler") && !(h.values as Values).steps?.send);
    expect(mid, JSON.stringify(history.map((h) => h.next))).toBeDefined();
    const checkpointId = mid!.checkpoint.checkpoint_id!;

    // replay: LangGraph re-executes the scheduler node; `send`'s attempt 1 is already claimed, so it
    // is in doubt (a person or the skill's reconcile decides), not executed
    await client.runs.wait(id, "toolchain", { input: null, checkpointId });
    expect(count()).toBe(1);
    expect(await pendingOf(id)).toEqual([expect.objectContaining({ stepId: "send", kind: "in_doubt" })]);

    // fork (Studio's "edit state" at that checkpoint, then run from the new one): the same;
    // the SDK types the answer as a config; the server answers `{ checkpoint }`
    const fork = (await client.threads.updateState(id, { values: {}, checkpointId })) as unknown as {
      checkpoint: { checkpoint_id: string };
    };
    await client.runs.wait(id, "toolchain", { input: null, checkpointId: fork.checkpoint.checkpoint_id });
    expect(count()).toBe(1);
    expect(await pendingOf(id)).toEqual([expect.objectContaining({ stepId: "send", kind: "in_doubt" })]);

    // resumed at the fork's head (the SDK otherwise resumes the run's own checkpoint), `mark_done`
    // records the effect as happened and the forked run goes on without executing it
    const head = async () => (await client.threads.getState(id)).checkpoint.checkpoint_id!;
    await client.runs.wait(id, "toolchain", {
      command: { resume: { decisions: { send: { decision: "mark_done", output: { sent: "x" } } } } },
      checkpointId: await head(),
    });
    expect((await pendingOf(id)).map((p) => p.stepId)).toEqual(["a"]);
    const final = (await client.runs.wait(id, "toolchain", {
      command: { resume: { decisions: { a: { decision: "approve" } } } },
      checkpointId: await head(),
    })) as { status: string; steps: Record<string, unknown> };
    expect(final.status).toBe("completed");
    expect(final.steps.send).toMatchObject({ status: "completed", output: { sent: "x" } });
    expect(count()).toBe(1);
  }, 120_000);
});
