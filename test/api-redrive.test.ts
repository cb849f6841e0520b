/**
 * Redrive over HTTP: the role it needs, the view it answers, the codes it refuses with; the run is
 * the same one the CLI and MCP redrive (RunService.redrive).
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { z } from "zod";
import { createRuntime } from "../src/runtime/runtime.js";
import { defineSkill } from "../src/skills/contract.js";
import { ToolchainError } from "../src/kernel/errors.js";
import { call, serveApi, type ApiUnderTest } from "./helpers/api.js";

let up = false;
const calls: string[] = [];
const provider = defineSkill({
  name: "t.provider",
  description: "fails while the provider is down",
  input: z.object({ label: z.string() }),
  sideEffects: "write",
  idempotent: true,
  async execute(a) {
    calls.push(a.label);
    if (!up) throw new ToolchainError("EXECUTION_FAILED", "provider down", { effectStarted: false });
    return { label: a.label };
  },
});

let api: ApiUnderTest;
const keys: Record<string, string> = {};
beforeAll(async () => {
  api = await serveApi(createRuntime({ skills: [provider] }), undefined);
  await api.access.ensureWorkspace("ws", {});
  await api.access.ensureWorkspace("other", {});
  for (const role of ["operator", "approver", "viewer"] as const)
    keys[role] = (await api.access.createKey("ws", { user: { id: role, roles: [role] } })).key;
  keys.other = (await api.access.createKey("other", {})).key;
});
afterAll(() => api.close());

describe("POST /api/tool-chains/runs/:id/redrive", () => {
  test("an operator redrives a failed run; other roles and workspaces cannot; completed runs are refused", async () => {
    const plan = {
      steps: [
        { stepId: "a", skillName: "core.pass", arguments: { value: 1 } },
        {
          stepId: "b",
          skillName: "t.provider",
          dependsOn: ["a"],
          arguments: { label: "b" },
          retry: { maxAttempts: 1 },
        },
      ],
    };
    const started = await call(api.url, "POST", "/api/tool-chains/run", { key: keys.operator, body: { plan } });
    expect(started.body.status).toBe("failed");
    const runId = started.body.runId as string;
    const path = `/api/tool-chains/runs/${runId}/redrive`;

    for (const role of ["approver", "viewer"]) {
      const r = await call(api.url, "POST", path, { key: keys[role], body: {} });
      expect(r.status).toBe(403);
      expect(r.body.error.code).toBe("ROLE_NOT_ALLOWED");
    }
    expect((await call(api.url, "POST", path, { key: keys.other, body: {} })).status).toBe(404);
    const bad = await call(api.url, "POST", path, { key: keys.operator, body: { overrides: { b: { label: 3 } } } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe("INVALID_REDRIVE");
    expect(bad.body.error.message).toContain("overrides.b");

    // a failed run's view is read (and could be kept as final) before it is redriven
    const viewPath = `/api/tool-chains/runs/${runId}`;
    expect((await call(api.url, "GET", viewPath, { key: keys.operator })).body.status).toBe("failed");
    up = true;
    const r = await call(api.url, "POST", path, { key: keys.operator, body: { wait: true } });
    expect(r.status).toBe(200);
    expect(r.body.status).toBe("completed");
    // the redriven run's view, not the failed one
    expect((await call(api.url, "GET", viewPath, { key: keys.operator })).body.status).toBe("completed");
    expect(r.body.redrives).toEqual([
      expect.objectContaining({ n: 1, by: expect.objectContaining({ id: "operator" }), via: "rest", steps: ["b"] }),
    ]);
    expect(calls).toEqual(["b", "b"]);

    const again = await call(api.url, "POST", path, { key: keys.operator, body: {} });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe("RUN_NOT_REDRIVABLE");
    const events = await call(api.url, "GET", `/api/tool-chains/runs/${runId}/events`, { key: keys.viewer });
    expect(events.body.events.filter((e: { type: string }) => e.type === "run_redriven")).toHaveLength(1);
  });
});
