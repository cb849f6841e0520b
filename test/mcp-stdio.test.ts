/**
 * `toolchain mcp` in a child process, driven by the official SDK's stdio client, on the embedded
 * database (a fresh data directory) or DATABASE_URL (a fresh schema): tools, a run that waits and
 * is confirmed with confirm_tool_chain_step, the same run seen by a second process after the
 * first exited, and a confirmation answered through elicitation.
 */
import path from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { TOOL_NAMES } from "../src/tools/definitions.js";
import { nodeArgs, sharedStorage } from "./helpers/child.js";
import { serverUrl } from "./helpers/backends.js";
import { callTool } from "./helpers/mcp.js";

const confirmPlan = (value: string) => ({
  steps: [
    { stepId: "a", skillName: "core.pass", arguments: { value } },
    {
      stepId: "b",
      skillName: "core.pass",
      dependsOn: ["a"],
      arguments: { value: { $ref: "steps.a" } },
      requireConfirmation: true,
    },
  ],
});

describe(`toolchain mcp (stdio) on ${serverUrl ? "postgres-server" : "postgres-embedded"}`, () => {
  const open: Client[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close().catch(() => undefined)));
  });

  const launch = async (env: Record<string, string>, o: { elicit?: boolean } = {}) => {
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [...nodeArgs("src/cli/main.ts"), "mcp"],
      env: { ...(process.env as Record<string, string>), ...(serverUrl ? {} : { DATABASE_URL: "" }), ...env },
      stderr: "pipe",
    });
    let stderr = "";
    transport.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    const client = new Client(
      { name: "stdio-tests", version: "1.0.0" },
      { capabilities: o.elicit ? { elicitation: { form: {} } } : {} },
    );
    if (o.elicit) client.setRequestHandler(ElicitRequestSchema, async () => ({ action: "accept" as const }));
    try {
      // opening the database comes first: slow on a loaded machine
      await client.connect(transport, { timeout: 180_000 });
    } catch (e) {
      throw new Error(`could not connect: ${(e as Error).message}\n${stderr}`);
    }
    open.push(client);
    return { client, stderr: () => stderr };
  };

  test("tools, a waiting run confirmed with confirm_tool_chain_step, the run seen again by the next process, elicitation", async () => {
    const storage = sharedStorage();
    const first = await launch(storage.env);
    const { tools } = await first.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...TOOL_NAMES].sort());

    const waiting = await callTool(first.client, "run_tool_chain", { plan: confirmPlan("x") });
    expect(waiting.data).toMatchObject({
      status: "waiting_confirmation",
      pending: [{ stepId: "b", arguments: { value: "x" } }],
    });
    const kept = await callTool(first.client, "run_tool_chain", { plan: confirmPlan("kept") });
    const done = await callTool(first.client, "confirm_tool_chain_step", {
      runId: waiting.data.runId,
      stepId: "b",
      decision: "approve",
    });
    expect(done.data).toMatchObject({ status: "completed", outputs: { b: "x" } });
    expect(first.stderr()).toContain('workspace "local"');
    await first.client.close();

    // the next process (embedded: the same data directory) finds the waiting run and finishes it through elicitation
    const second = await launch(storage.env, { elicit: true });
    expect((await callTool(second.client, "get_tool_chain_run", { runId: kept.data.runId })).data.status).toBe(
      "waiting_confirmation",
    );
    const resumed = await callTool(second.client, "confirm_tool_chain_step", {
      runId: kept.data.runId,
      stepId: "b",
      decision: "approve",
    });
    expect(resumed.data).toMatchObject({ status: "completed", outputs: { b: "kept" } });
    const asked = await callTool(second.client, "run_tool_chain", { plan: confirmPlan("y") });
    expect(asked.data).toMatchObject({ status: "completed", outputs: { b: "y" } });
  }, 400_000);

  test("an unknown key is refused at start", async () => {
    await expect(launch({ ...sharedStorage().env, TOOLCHAIN_API_KEY: "tck_nope" })).rejects.toThrow(
      /UNAUTHORIZED: TOOLCHAIN_API_KEY/,
    );
  }, 200_000);
});
