/**
 * README promises of the MCP surface (MCP, confirmations), with the official SDK client over real
 * HTTP, a client that declares elicitation:
 * - in-doubt steps are never asked through elicitation: they come back in `pending` with their kind;
 * - a step answered elsewhere (the REST API) while a question is open is not asked again.
 * (Failed strict compensations not asked, and idle sessions closed: test/mcp-capacity.test.ts.)
 */
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { defineSkill } from "../src/skills/contract.js";
import type { Runtime } from "../src/runtime/runtime.js";
import { memoryBackend } from "./helpers/backends.js";
import { call, newKey, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { callTool, mcpClient } from "./helpers/mcp.js";
import { approvalSkill, EffectLedger, effectSkill } from "./helpers/skills.js";

describe("MCP elicitation asks only what a person can answer there", () => {
  const ledger = new EffectLedger();
  const clients: Client[] = [];
  let runtime: Runtime;
  let api: ApiUnderTest;
  let key: string;
  let close: () => Promise<void>;
  /** Plays the process that died inside `s`: it had claimed s's attempt 1 (the intent) and never finished. */
  const diedInside = defineSkill({
    name: "t.died_inside",
    description: "leaves the next step's attempt claimed, as a process that died mid-effect would",
    input: z.object({ step: z.string() }),
    sideEffects: "none",
    idempotent: true,
    async execute(a, ctx) {
      await runtime.env.intents.claimIntent(ctx.runId, a.step, 1, "a-dead-process");
      return "claimed";
    },
  });
  beforeAll(async () => {
    const o = await memoryBackend.open({ skills: [approvalSkill(ledger), effectSkill(ledger), diedInside] });
    runtime = o.runtime;
    api = await serveApi(o.runtime, undefined);
    key = await newKey(api.access, "ws-mcp-promises");
    close = async () => {
      await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
      await api.close();
      await o.close();
    };
  });
  afterAll(() => close?.());
  const connect = async (...a: Parameters<typeof mcpClient>) => {
    const c = await mcpClient(...a);
    clients.push(c);
    return c;
  };

  test("an in-doubt step is never asked: the call returns it in pending with kind in_doubt", async () => {
    const asked: string[] = [];
    const c = await connect(api.url, key, { elicit: (q) => (asked.push(q.message), { action: "accept" }) });
    const res = await callTool(c, "run_tool_chain", {
      plan: {
        steps: [
          { stepId: "d", skillName: "t.died_inside", arguments: { step: "s" } },
          { stepId: "s", skillName: "test.effect", dependsOn: ["d"], arguments: { label: "s" } },
        ],
      },
    });
    expect(asked).toEqual([]);
    expect(res.data.status).toBe("waiting_confirmation");
    expect(res.data.pending).toEqual([expect.objectContaining({ stepId: "s", kind: "in_doubt" })]);
    const runId = res.data.runId as string;
    expect(ledger.effects.get(`${runId}:s`)).toBeUndefined();
    // answered with the tool instead (the person knows whether it happened)
    const done = await callTool(c, "confirm_tool_chain_step", {
      runId,
      stepId: "s",
      decision: "mark_done",
      round: res.data.pending[0].round,
      output: { label: "s" },
    });
    expect(done.data.status).toBe("completed");
    expect(asked).toEqual([]);
    expect(ledger.effects.get(`${runId}:s`)).toBeUndefined();
  });

  test("a step answered elsewhere while the question about another is open is not asked again", async () => {
    const asked: string[] = [];
    const c = await connect(api.url, key, {
      elicit: async (q) => {
        const runId = /run (\S+) waits/.exec(q.message)![1]!;
        const view = (await call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key })).body;
        const askedAbout = view.pendingConfirmations.find((p: { stepId: string }) =>
          q.message.includes(`"${p.stepId}"`),
        )?.stepId as string;
        asked.push(askedAbout);
        // the other waiting step is approved meanwhile from the REST API
        for (const p of view.pendingConfirmations as { stepId: string; round: number }[])
          if (p.stepId !== askedAbout)
            expect(
              (
                await call(api.url, "POST", `/api/tool-chains/runs/${runId}/confirm`, {
                  key,
                  body: { stepId: p.stepId, decision: "approve", round: p.round },
                })
              ).status,
            ).toBe(200);
        return { action: "accept" };
      },
    });
    const res = await callTool(c, "run_tool_chain", {
      plan: {
        steps: [
          { stepId: "p", skillName: "test.publish", arguments: { title: "p" } },
          { stepId: "q", skillName: "test.publish", arguments: { title: "q" } },
        ],
      },
    });
    expect(asked).toHaveLength(1);
    expect(["p", "q"]).toContain(asked[0]);
    expect(res.data.status).toBe("completed");
    const runId = res.data.runId as string;
    expect([ledger.effects.get(`${runId}:p`), ledger.effects.get(`${runId}:q`)]).toEqual([1, 1]);
  });
});
