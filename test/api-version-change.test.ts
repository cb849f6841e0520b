/**
 * A confirmation resumed after a deploy, over HTTP: the step began waiting under one version of its
 * skill and is decided under the next. The pending confirmation says the version changed, with the
 * arguments as the new version runs them and its recomputed preview where they differ from what
 * the approver was shown (or why they no longer validate, naming the field); after `runs migrate`
 * (Runtime.migrateRuns) the arguments are the new ones and only the preview still differs.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { createRuntime } from "../src/runtime/runtime.js";
import { MemoryAccessStore } from "../src/store/access-store.js";
import { call, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { notifyV2 as v2, waitingUnderV1 } from "./helpers/deploy.js";

let checkpointer: Awaited<ReturnType<typeof waitingUnderV1>>["checkpointer"];
let store: Awaited<ReturnType<typeof waitingUnderV1>>["store"];
let api: ApiUnderTest;
let key: string;
const runs: Record<string, string> = {};
beforeAll(async () => {
  // the first deploy starts the runs; they wait for their confirmations
  const plan = (label: string) => ({ steps: [{ stepId: "n", skillName: "t.notify", arguments: { label } }] });
  const first = await waitingUnderV1([plan("ok"), plan("")], "ws");
  ({ checkpointer, store } = first);
  runs.ok = first.runIds[0]!;
  runs.empty = first.runIds[1]!;
  // the next deploy serves the API
  const access = new MemoryAccessStore();
  api = await serveApi(createRuntime({ skills: [v2], checkpointer, store }), undefined, { access });
  await access.ensureWorkspace("ws", {});
  key = (await access.createKey("ws", {})).key;
});
afterAll(() => api?.close());

const pendingOf = async (runId: string) =>
  (await call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key })).body.pendingConfirmations[0];

describe("a confirmation after a deploy", () => {
  test("the approver sees the version change, the arguments as they will run and the preview that now differs", async () => {
    const p = await pendingOf(runs.ok!);
    expect(p.arguments).toEqual({ label: "ok" });
    expect(p.preview).toEqual({ message: "notify ok" });
    expect(p.versionChanged).toMatchObject({
      from: { version: "1.0.0" },
      to: { version: "2.0.0" },
      arguments: { name: "ok" },
      preview: { message: "notify ok", channel: "email" },
    });
    expect(p.versionChanged.error).toBeUndefined();

    // arguments the new version refuses: the approver is told which field, before approving
    const bad = await pendingOf(runs.empty!);
    expect(bad.versionChanged.error.code).toBe("INVALID_INPUT");
    expect(bad.versionChanged.error.message).toContain("arguments.name");
    expect(bad.versionChanged.preview).toBeUndefined();

    // migrated: the waiting arguments are the new version's; what the approver saw still differs
    const report = await api.runtime.migrateRuns({ skill: "t.notify", workspaceId: "ws" });
    expect(report.runs.find((r) => r.runId === runs.ok)?.outcome).toBe("migrated");
    const migrated = await pendingOf(runs.ok!);
    expect(migrated.arguments).toEqual({ name: "ok" });
    expect(migrated.versionChanged.arguments).toBeUndefined();
    expect(migrated.versionChanged.preview).toEqual({ message: "notify ok", channel: "email" });

    const done = await call(api.url, "POST", `/api/tool-chains/runs/${runs.ok}/confirm`, {
      key,
      body: { stepId: "n", decision: "approve", wait: true },
    });
    expect(done.body.status).toBe("completed");
    expect(done.body.steps[0].output).toEqual({ sent: "ok", v: 2 });
  });

  test("no version change, no notice", async () => {
    const same = createRuntime({ skills: [v2], checkpointer, store });
    const view = await same.run(
      { steps: [{ stepId: "n", skillName: "t.notify", arguments: { name: "x" } }] },
      {
        workspaceId: "ws",
      },
    ).result;
    expect(view.pendingConfirmations[0]).not.toHaveProperty("versionChanged");
  });
});
