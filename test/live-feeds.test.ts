/**
 * Run feeds (src/live/feeds.ts): followers joining at any point, behind or ahead of the shared
 * feed, while events are appended, each receive exactly the events after their start, in order,
 * and end when the run ends.
 */
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import type { EmittedEvent, RunEvent } from "../src/kernel/events.js";
import { RunFeeds } from "../src/live/feeds.js";
import { RunSignals } from "../src/live/signals.js";
import { MemoryRunStore } from "../src/store/memory-run-store.js";

const ev = (i: number, type: EmittedEvent["type"] = "step_started"): EmittedEvent => ({
  type,
  stepId: type.startsWith("step") ? `s${i}` : undefined,
  at: new Date().toISOString(),
  data: {},
  key: `k${i}`,
});
const tick = () => new Promise((r) => setTimeout(r, 0));

describe("run feeds", () => {
  test("followers joining at random points receive exactly (after, last], in order, then end", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.nat(40), fc.nat(40)), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 5, max: 40 }),
        async (joins, total) => {
          const store = new MemoryRunStore();
          const signals = new RunSignals(store);
          const feeds = new RunFeeds(store, signals, { pollMs: 20 });
          await store.createRun({
            runId: "r",
            workspaceId: "w",
            traceId: "t",
            plan: { steps: [] } as never,
            context: {},
            memory: {},
          });
          const followers: { after: number; got: number[]; done: Promise<void> }[] = [];
          for (let i = 1; i <= total; i++) {
            for (const [at, after] of joins) {
              if (at % total !== i - 1) continue;
              const start = Math.min(after, i - 1);
              const f = { after: start, got: [] as number[], done: Promise.resolve() };
              f.done = (async () => {
                for await (const e of feeds.follow("r", { after: start, until: "terminal" }))
                  f.got.push((e as RunEvent).seq);
              })();
              followers.push(f);
            }
            await store.append("r", [i === total ? ev(i, "run_completed") : ev(i)]);
            if (i % 3 === 0) await tick();
          }
          await Promise.all(followers.map((f) => f.done));
          for (const f of followers)
            expect(f.got).toEqual(Array.from({ length: total - f.after }, (_, k) => f.after + k + 1));
          expect(feeds.size).toBe(0);
          feeds.close();
          await signals.close();
        },
      ),
      { numRuns: 40 },
    );
  });

  test("a follower of a run that waits for a decision ends there only when it asked to (settled)", async () => {
    const store = new MemoryRunStore();
    const signals = new RunSignals(store);
    const feeds = new RunFeeds(store, signals, { pollMs: 20 });
    await store.createRun({
      runId: "r",
      workspaceId: "w",
      traceId: "t",
      plan: { steps: [] } as never,
      context: {},
      memory: {},
    });
    const settled: number[] = [];
    const terminal: number[] = [];
    const a = (async () => {
      for await (const e of feeds.follow("r", { after: 0, until: "settled" })) settled.push(e.seq);
    })();
    const b = (async () => {
      for await (const e of feeds.follow("r", { after: 0, until: "terminal" })) terminal.push(e.seq);
    })();
    await store.append("r", [ev(1, "planning_started"), ev(2, "run_waiting_confirmation")]);
    await a;
    expect(settled).toEqual([1, 2]);
    await store.append("r", [ev(3, "step_confirmed"), ev(4, "run_completed")]);
    await b;
    expect(terminal).toEqual([1, 2, 3, 4]);
    feeds.close();
    await signals.close();
  });
});
