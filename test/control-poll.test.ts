/**
 * Cancels and decisions recorded by other processes reach the executing one through ONE read per
 * poll for all the runs it executes (src/runtime/control-poll.ts), not one read per run:
 * - the poll itself, with faked intervals: one read per tick naming every watched run, none while
 *   a read is still out, none once nothing is watched, and only the runs answered are told;
 * - on memory and on Postgres: 24 runs in flight on process a cost about one read per interval,
 *   each naming all of them; cancels recorded by process b for three of them are applied by a
 *   at its next poll, and the other runs are untouched (they complete, their steps ran once).
 */
import { afterEach, describe, expect, test, vi } from "vitest";
import { ControlPoll } from "../src/runtime/control-poll.js";
import type { ControlRequests } from "../src/store/run-store.js";
import { backends } from "./helpers/backends.js";
import { waitFor } from "./helpers/wait.js";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const c of closers.splice(0)) await c();
});

const cancelled = (reason: string): ControlRequests => ({
  cancel: { reason, at: new Date(0).toISOString() },
  decisions: [],
});

describe("the control poll", () => {
  test("one read per tick for every watched run; never two at once; none once nothing is watched", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const reads: string[][] = [];
    let answer: (m: Map<string, ControlRequests>) => void = () => undefined;
    const poll = new ControlPoll((ids) => {
      reads.push([...ids]);
      return new Promise((r) => (answer = r));
    }, 100);
    const told: string[] = [];
    const unwatch = ["r1", "r2", "r3"].map((id) => poll.watch(id, (req) => told.push(`${id}:${req.cancel?.reason}`)));
    await vi.advanceTimersByTimeAsync(99);
    expect(reads).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(reads).toEqual([["r1", "r2", "r3"]]);
    // the read is still out: later ticks do not ask again
    await vi.advanceTimersByTimeAsync(300);
    expect(reads.length).toBe(1);
    // r3 stops being watched while the read is out: it is not told, r2 (answered) is
    unwatch[2]!();
    answer(
      new Map([
        ["r2", cancelled("stop r2")],
        ["r3", cancelled("stop r3")],
      ]),
    );
    await vi.advanceTimersByTimeAsync(0);
    expect(told).toEqual(["r2:stop r2"]);
    await vi.advanceTimersByTimeAsync(100);
    expect(reads.at(-1)).toEqual(["r1", "r2"]);
    answer(new Map());
    await vi.advanceTimersByTimeAsync(0);
    // nothing watched: the interval is gone and nothing is read
    unwatch[0]!();
    unwatch[1]!();
    expect(poll.size).toBe(0);
    const before = reads.length;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(reads.length).toBe(before);
    expect(vi.getTimerCount()).toBe(0);
  });

  test("a read that fails is retried at the next tick", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    let calls = 0;
    const poll = new ControlPoll(async () => {
      if (++calls === 1) throw new Error("connection reset");
      return new Map([["r", cancelled("late")]]);
    }, 50);
    const told: string[] = [];
    const stop = poll.watch("r", (req) => told.push(req.cancel!.reason));
    await vi.advanceTimersByTimeAsync(50);
    expect(told).toEqual([]);
    await vi.advanceTimersByTimeAsync(50);
    expect(told).toEqual(["late"]);
    stop();
  });
});

describe.each(backends)("runs in flight on $name", (backend) => {
  test("one read per poll for all of them; another process's cancels applied at the next poll, the rest untouched", async () => {
    const pollMs = 50;
    const pair = await backend.openPair({ decisionPollMs: pollMs });
    closers.push(pair.close);
    const store = pair.a.store;
    const reads: number[] = [];
    const read = store.controlRequests.bind(store);
    store.controlRequests = (ids) => (reads.push(ids.length), read(ids));
    const plan = {
      steps: [
        { stepId: "w", skillName: "core.wait", arguments: { ms: 1_500, value: 1 } },
        { stepId: "after", skillName: "core.pass", dependsOn: ["w"], arguments: { value: 2 } },
      ],
    };
    const handles = Array.from({ length: 24 }, () => pair.a.run(plan));
    await waitFor(() => pair.a.activeRuns().length === 24 && reads.includes(24), { what: "every run watched" });
    const t0 = Date.now();
    reads.length = 0;
    await new Promise((r) => setTimeout(r, 10 * pollMs));
    const elapsed = Date.now() - t0;
    // about one read per interval, each naming every run: not one per run
    expect(reads.length).toBeGreaterThan(0);
    expect(reads.length).toBeLessThanOrEqual(Math.ceil(elapsed / pollMs) + 1);
    expect(reads.every((n) => n === 24)).toBe(true);
    const stopped = handles.slice(0, 3).map((h) => h.runId);
    for (const id of stopped) await pair.b.cancel(id, "stopped by b");
    const views = await Promise.all(handles.map((h) => h.result));
    for (const v of views) {
      if (stopped.includes(v.runId)) {
        expect(v.status).toBe("cancelled");
        expect(v.steps.find((s) => s.stepId === "after")!.status).not.toBe("completed");
      } else {
        expect(v.status).toBe("completed");
        expect(v.steps.map((s) => s.attempts)).toEqual([1, 1]);
      }
    }
    // every run ended: nothing is watched or read any more
    const after = reads.length;
    await new Promise((r) => setTimeout(r, 4 * pollMs));
    expect(reads.length).toBe(after);
  }, 30_000);
});
