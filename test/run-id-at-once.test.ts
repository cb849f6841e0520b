/**
 * `run()` gives out the run's id before its row's insert commits (the drive starts at once): every
 * method about that id works straight away, waiting for the insert rather than answering "not
 * found" (CI hit it on a loaded server: getRun right after run() threw RUN_NOT_FOUND). The store's
 * insert is held back 300 ms here so the window is certain. On memory and on Postgres.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { Runtime } from "../src/runtime/runtime.js";
import { backends } from "./helpers/backends.js";
import { Gates, gateSkill } from "./helpers/skills.js";

const plan = (gate: string) => ({ steps: [{ stepId: "a", skillName: "test.gate", arguments: { gate } }] });

describe.each(backends)("a run's id at once, on $name", (backend) => {
  const gates = new Gates();
  let rt: Runtime;
  let close: () => Promise<void>;
  let inserted = 0;
  beforeAll(async () => {
    const o = await backend.open({ skills: [gateSkill(gates, new Map())] });
    ({ runtime: rt, close } = o);
    // the instance the runtime records runs through, its insert slowed
    const store = rt.store;
    const insert = store.createRun.bind(store);
    store.createRun = async (...args) => {
      await new Promise((r) => setTimeout(r, 300));
      const row = await insert(...args);
      inserted++;
      return row;
    };
  }, 180_000);
  afterAll(() => close());

  test("getRun, inspect, events and viewVersion right after run() answer for the run", async () => {
    const before = inserted;
    const h = rt.run(plan("g1"));
    // each answer notes how many inserts had committed when it came: none may come before this one
    const noted = <T>(p: Promise<T>) => p.then((v) => ({ v, inserted }));
    const [view, inspected, events, version] = await Promise.all([
      noted(rt.getRun(h.runId)),
      noted(rt.inspect(h.runId)),
      noted(rt.events(h.runId)),
      noted(rt.viewVersion(h.runId)),
    ]);
    for (const a of [view, inspected, events, version]) expect(a.inserted).toBe(before + 1);
    expect(view.v).toMatchObject({ runId: h.runId, plan: { steps: [{ stepId: "a" }] } });
    expect(inspected.v.view.runId).toBe(h.runId);
    expect(events.v.every((e) => e.runId === h.runId)).toBe(true);
    expect(version.v === null || typeof version.v === "string").toBe(true);
    await gates.untilEntered("g1");
    gates.open("g1");
    expect((await h.result).status).toBe("completed");
  });

  test("cancel right after run() cancels the run", async () => {
    const h = rt.run(plan("g2"));
    const cancelled = await (await rt.cancel(h.runId, "at once")).result;
    expect(cancelled.status).toBe("cancelled");
    gates.open("g2");
  });

  test("an id this process is not recording is still refused at once", async () => {
    const t0 = Date.now();
    await expect(rt.getRun("no-such-run")).rejects.toMatchObject({ code: "RUN_NOT_FOUND" });
    expect(Date.now() - t0).toBeLessThan(300);
  });
});
