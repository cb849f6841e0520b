/**
 * A confirmation after a deploy, through MCP with the official client: the tools' compact result
 * carries `versionChanged`, their text summary and the elicitation question say what the new
 * version runs and shows (src/kernel/version-notice.ts), before the person decides.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { ElicitRequest } from "@modelcontextprotocol/sdk/types.js";
import { createRuntime } from "../src/runtime/runtime.js";
import { MemoryAccessStore } from "../src/store/access-store.js";
import { serveApi, type ApiUnderTest } from "./helpers/api.js";
import { notifyV2, waitingUnderV1 } from "./helpers/deploy.js";
import { callTool, mcpClient } from "./helpers/mcp.js";

const WS = "ws-mcp-version";
let api: ApiUnderTest;
let key: string;
let runId = "";
const clients: Client[] = [];
beforeAll(async () => {
  // both steps wait under the first deploy; the next one serves MCP
  const first = await waitingUnderV1(
    [
      {
        steps: [
          { stepId: "p", skillName: "core.pass", arguments: { value: 1 }, requireConfirmation: true },
          { stepId: "n", skillName: "t.notify", arguments: { label: "ok" } },
        ],
      },
    ],
    WS,
  );
  runId = first.runIds[0]!;
  const access = new MemoryAccessStore();
  const runtime = createRuntime({ skills: [notifyV2], checkpointer: first.checkpointer, store: first.store });
  api = await serveApi(runtime, undefined, { access });
  await access.ensureWorkspace(WS, {});
  key = (await access.createKey(WS, {})).key;
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await api?.close();
});

const NOTICE = "The skill changed while this step waited: t.notify 1.0.0 → 2.0.0; approving runs the new version.";

describe("MCP after a deploy", () => {
  test("get_tool_chain_run: the compact result and its summary say what changed", async () => {
    const client = await mcpClient(api.url, key);
    clients.push(client);
    const got = await callTool(client, "get_tool_chain_run", { runId });
    const n = got.data.pending.find((p: { stepId: string }) => p.stepId === "n");
    expect(n.versionChanged).toMatchObject({
      from: { version: "1.0.0" },
      to: { version: "2.0.0" },
      arguments: { name: "ok" },
      preview: { message: "notify ok", channel: "email" },
    });
    expect(got.data.pending.find((p: { stepId: string }) => p.stepId === "p")).not.toHaveProperty("versionChanged");
    expect(got.text).toContain(NOTICE);
    expect(got.text).toContain('Arguments as the new version runs them (label removed, name added): {"name":"ok"}');
    expect(got.text).toContain(
      'Preview by the new version, unlike the one shown (channel added): {"message":"notify ok","channel":"email"}',
    );
  });

  test("elicitation: the question about the changed step says so; declined, it never runs", async () => {
    const asked: ElicitRequest["params"][] = [];
    const client = await mcpClient(api.url, key, { elicit: (q) => (asked.push(q), { action: "decline" }) });
    clients.push(client);
    const done = await callTool(client, "confirm_tool_chain_step", { runId, stepId: "p", decision: "approve" });
    expect(asked).toHaveLength(1);
    expect(asked[0]!.message).toContain('Step "n" (t.notify)');
    expect(asked[0]!.message).toContain(NOTICE);
    expect(asked[0]!.message).toContain("(channel added)");
    expect(done.data.steps.find((s: { stepId: string }) => s.stepId === "n")).toMatchObject({
      status: "failed",
      error: { code: "REJECTED" },
    });
  });
});
