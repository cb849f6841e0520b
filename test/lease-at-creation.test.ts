/**
 * A run started with `run()` is recorded already leased to the process that drives it
 * (src/store/run-store.ts createRun's `lease`): no worker can claim it between its creation and its
 * drive, a process that dies right after creating it leaves it to be claimed once the lease
 * expired, and the drive that ends it releases the lease with its final sync. On both stores.
 */
import { afterAll, describe, expect, test } from "vitest";
import { memoryBackend, postgresBackend } from "./helpers/backends.js";

const closers: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const c of closers.splice(0)) await c();
});

const record = (runId: string) => ({
  runId,
  workspaceId: "default",
  traceId: "t",
  plan: {
    steps: [{ stepId: "a", skillName: "core.pass", dependsOn: [] as string[], arguments: { value: 1 } }],
    onFailure: "skip_dependents" as const,
    rollbackMode: "best_effort" as const,
  },
  context: {},
  memory: {},
});

describe.each([memoryBackend, postgresBackend])("runs recorded leased ($name)", (backend) => {
  test("a run recorded leased is not claimable by another worker until its lease expires; an unleased one is at once", async () => {
    const o = await backend.open();
    closers.push(o.close);
    const store = o.runtime.store;
    const row = await store.createRun(record("leased-1"), { owner: "creator", ttlMs: 400 });
    expect(row).toMatchObject({ runId: "leased-1", status: "queued", leaseOwner: "creator" });
    expect(await store.createRun(record("free-1"))).toBeUndefined();
    // another worker claims only the unleased one
    expect(await store.claimRunnable("other", 60_000, 10)).toEqual(["free-1"]);
    expect(await store.takeLease("leased-1", "other", 60_000)).toBeUndefined();
    // the creator died: once its lease expired, a worker takes the run over
    await new Promise((r) => setTimeout(r, 600));
    expect(await store.claimRunnable("other", 60_000, 10)).toEqual(["leased-1"]);
    expect((await store.getRow("leased-1"))!.leaseOwner).toBe("other");
  });

  test("run() drives a run recorded leased to its own process and ends with the lease released", async () => {
    const o = await backend.open();
    closers.push(o.close);
    const h = o.runtime.run({ steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: 7 } }] });
    const view = await h.result;
    expect(view.status).toBe("completed");
    expect(view.steps[0]!.output).toBe(7);
    expect(await o.runtime.store.getRow(h.runId)).toMatchObject({ leaseOwner: null, leaseExpiresAt: null });
    // nothing left for a worker to claim
    expect(await o.runtime.store.claimRunnable("other", 60_000, 10)).toEqual([]);
  });

  test("a run that waits for a decision ends its drive with the lease released (another process may resume it)", async () => {
    const o = await backend.open();
    closers.push(o.close);
    const h = o.runtime.run({
      steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: 1 }, requireConfirmation: true }],
    });
    const view = await h.result;
    expect(view.status).toBe("waiting_confirmation");
    expect((await o.runtime.store.getRow(h.runId))!.leaseOwner).toBeNull();
  });
});
