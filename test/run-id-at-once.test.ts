/**
 * `run()` gives out the run's id before its row's insert commits (the drive starts at once): every
 * method about that id works straight away, waiting for the insert rather than answering "not
 * found" (CI hit it on a loaded server: getRun right after run() threw RUN_NOT_FOUND). The store's
 * insert is held back here so the window is certain.
 */
import { expect, test } from "vitest";
import { createRuntime } from "../src/index.js";
import { MemoryRunStore } from "../src/store/memory-run-store.js";
import { Gates, gateSkill } from "./helpers/skills.js";

class SlowInsertStore extends MemoryRunStore {
  inserted = 0;
  override async createRun(...args: Parameters<MemoryRunStore["createRun"]>) {
    await new Promise((r) => setTimeout(r, 300));
    const row = await super.createRun(...args);
    this.inserted++;
    return row;
  }
}

const plan = { steps: [{ stepId: "a", skillName: "test.gate", arguments: { gate: "g" } }] };

test("getRun, inspect, events, viewVersion and cancel right after run(), while the insert is in flight", async () => {
  const store = new SlowInsertStore();
  const gates = new Gates();
  const rt = createRuntime({ store, skills: [gateSkill(gates, new Map())] });
  const h = rt.run(plan);
  const [view, inspected, events, version] = await Promise.all([
    rt.getRun(h.runId),
    rt.inspect(h.runId),
    rt.events(h.runId),
    rt.viewVersion(h.runId),
  ]);
  expect(store.inserted).toBe(1);
  expect(view.runId).toBe(h.runId);
  expect(inspected.view.runId).toBe(h.runId);
  expect(Array.isArray(events)).toBe(true);
  expect(version === null || typeof version === "string").toBe(true);
  await gates.untilEntered("g");
  const h2 = rt.run(plan);
  const cancelled = await (await rt.cancel(h2.runId, "at once")).result;
  expect(cancelled.status).toBe("cancelled");
  gates.open("g");
  expect((await h.result).status).toBe("completed");
});

test("an id this process is not recording is still refused at once", async () => {
  const rt = createRuntime({ store: new SlowInsertStore() });
  await expect(rt.getRun("no-such-run")).rejects.toMatchObject({ code: "RUN_NOT_FOUND" });
});
