/**
 * The leases of every run a process executes are renewed in ONE statement per beat
 * (src/runtime/lease-keeper.ts over src/runtime/run-ticker.ts), not one timer and one statement
 * per run:
 * - the keeper itself, with faked intervals: one renewal per beat naming every held run, beats
 *   every ttl/3, none while one is still out, none once nothing is held; a run the answer leaves
 *   out is told it lost its lease, unless its drive ended (or a new one began) meanwhile; a failed
 *   renewal tells nobody and the next beat renews again;
 * - on memory and on Postgres: 12 runs in flight on process a cost about one renewal per beat,
 *   each naming all of them; three leases released behind a's back stop those three drives at
 *   the next beat (the running step is aborted, not completed by a), and b recovers them: every
 *   run completes, and the ones a kept ran their steps once.
 */
import { afterEach, describe, expect, test, vi } from "vitest";
import { LeaseKeeper } from "../src/runtime/lease-keeper.js";
import { backends } from "./helpers/backends.js";
import { waitFor } from "./helpers/wait.js";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const c of closers.splice(0)) await c();
});

describe("the lease keeper", () => {
  test("one renewal per beat for every held run; the runs left out are told, once, while still held", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const renewals: string[][] = [];
    let answer: (held: Set<string>) => void = () => undefined;
    const keeper = new LeaseKeeper((ids) => {
      renewals.push([...ids]);
      return new Promise((r) => (answer = r));
    }, 300);
    const lost: string[] = [];
    const release = ["r1", "r2", "r3", "r4"].map((id) => keeper.hold(id, () => lost.push(id)));
    await vi.advanceTimersByTimeAsync(99);
    expect(renewals).toEqual([]);
    await vi.advanceTimersByTimeAsync(1); // ttl / 3
    expect(renewals).toEqual([["r1", "r2", "r3", "r4"]]);
    await vi.advanceTimersByTimeAsync(300); // still out: not asked again
    expect(renewals.length).toBe(1);
    // r3's drive ended while the renewal was out, r4's ended and a new drive holds it: neither is told
    release[2]!();
    release[3]!();
    const release4 = keeper.hold("r4", () => lost.push("r4 again"));
    answer(new Set(["r1"]));
    await vi.advanceTimersByTimeAsync(0);
    expect(lost).toEqual(["r2"]);
    release[1]!();
    await vi.advanceTimersByTimeAsync(100);
    expect(renewals.at(-1)).toEqual(["r1", "r4"]);
    answer(new Set(["r1", "r4"]));
    await vi.advanceTimersByTimeAsync(0);
    expect(lost).toEqual(["r2"]);
    release[0]!();
    release4();
    expect(keeper.size).toBe(0);
    const before = renewals.length;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(renewals.length).toBe(before);
    expect(vi.getTimerCount()).toBe(0);
  });

  test("a renewal that fails tells nobody; the next beat renews again", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    let calls = 0;
    const keeper = new LeaseKeeper(async (ids) => {
      if (++calls === 1) throw new Error("connection reset");
      return new Set(ids);
    }, 150);
    const lost: string[] = [];
    const release = keeper.hold("r", () => lost.push("r"));
    await vi.advanceTimersByTimeAsync(100);
    expect([calls, lost]).toEqual([2, []]);
    release();
  });
});

describe.each(backends)("leases of runs in flight on $name", (backend) => {
  test("one renewal per beat for all of them; a lease lost behind the drive's back stops that drive only", async () => {
    const leaseTtlMs = 600;
    const pair = await backend.openPair({ leaseTtlMs });
    closers.push(pair.close);
    const store = pair.a.store;
    const renewals: number[] = [];
    const renew = store.renewLeases.bind(store);
    store.renewLeases = (ids, owner, ttl) => (renewals.push(ids.length), renew(ids, owner, ttl));
    const plan = {
      steps: [
        { stepId: "w", skillName: "core.wait", arguments: { ms: 6_000, value: 1 } },
        { stepId: "after", skillName: "core.pass", dependsOn: ["w"], arguments: { value: 2 } },
      ],
    };
    const handles = Array.from({ length: 12 }, () => pair.a.run(plan));
    await waitFor(() => pair.a.activeRuns().length === 12 && renewals.includes(12), { what: "every lease held" });
    // a beat's statement may be slow (PGlite under load): wait for a few, then bound their rate
    const t0 = Date.now();
    renewals.length = 0;
    await waitFor(() => renewals.length >= 3, { timeoutMs: 10_000, what: "three beats" });
    const elapsed = Date.now() - t0;
    expect(renewals.length).toBeLessThanOrEqual(Math.ceil(elapsed / (leaseTtlMs / 3)) + 1);
    expect(renewals.every((n) => n === 12)).toBe(true);
    // an operator (or a takeover) releases three leases: a's next beat stops exactly those drives
    const taken = handles.slice(0, 3).map((h) => h.runId);
    for (const id of taken) await store.releaseLease(id, pair.a.owner);
    // at a beat (every 200 ms), well before their step's end could fence them at its next write
    await waitFor(() => taken.every((id) => !pair.a.activeRuns().includes(id)), {
      timeoutMs: 3_500,
      what: "the three drives stopped",
    });
    expect(pair.a.activeRuns().length).toBe(9);
    const kept = await Promise.all(handles.slice(3).map((h) => h.result));
    for (const v of kept) {
      expect(v.status).toBe("completed");
      expect(v.steps.map((s) => s.attempts)).toEqual([1, 1]);
    }
    // the three are left to recovery, which completes them from their checkpoints
    const recovered = new Set<string>();
    await waitFor(
      async () => {
        for (const id of await pair.b.recover()) recovered.add(id);
        return taken.every((id) => recovered.has(id));
      },
      { intervalMs: 25, what: "b recovered the three" },
    );
    await pair.b.drain();
    for (const id of taken) expect((await pair.b.getRun(id)).status).toBe("completed");
  }, 45_000);
});
