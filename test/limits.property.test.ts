/**
 * The pure rules of limits across runs (src/kernel/limits.ts) and the in-process coordinator
 * (src/store/memory-limits.ts): canonical order, FIFO admission, the rate window; random
 * acquire/release schedules never exceed a limit, grant in arrival order, and never deadlock.
 */
import { fc, test as propTest } from "@fast-check/vitest";
import { describe, expect, test } from "vitest";
import { admits, canonicalClaims, nextStartAt, type LimitClaim } from "../src/kernel/limits.js";
import { MemoryLimits } from "../src/store/memory-limits.js";

const claimArb: fc.Arbitrary<LimitClaim> = fc.record({
  kind: fc.constantFrom("serialKey" as const, "resource" as const),
  name: fc.constantFrom("a", "b", "c", "skill:x"),
  limit: fc.integer({ min: 1, max: 4 }),
});

describe("pure rules", () => {
  propTest.prop([fc.array(claimArb, { maxLength: 8 })])(
    "canonical order: sorted, one entry per key, the tighter limit, whatever the input order",
    (claims) => {
      const c = canonicalClaims(claims);
      const keys = c.map((x) => `${x.kind}\u0000${x.name}`);
      expect(keys).toEqual([...new Set(keys)].sort());
      expect(canonicalClaims([...claims].reverse())).toEqual(c);
      for (const x of c)
        expect(x.limit).toBe(
          Math.min(...claims.filter((y) => y.kind === x.kind && y.name === x.name).map((y) => y.limit)),
        );
    },
  );

  propTest.prop([fc.integer({ min: 1, max: 10 }), fc.integer({ min: 0, max: 10 }), fc.integer({ min: 0, max: 10 })])(
    "FIFO admission: room for the holders and every waiter ahead",
    (limit, held, ahead) => {
      expect(admits(limit, held, ahead)).toBe(held + ahead < limit);
    },
  );

  propTest.prop([
    fc.integer({ min: 1, max: 5 }),
    fc.array(fc.integer({ min: 0, max: 3_000 }), { maxLength: 12 }),
    fc.integer({ min: 0, max: 3_000 }),
  ])(
    "rate window: after the next start, no rolling second holds more than perSecond starts",
    (perSecond, starts, now) => {
      const past = starts.filter((t) => t <= now);
      const at = nextStartAt(perSecond, past, now);
      expect(at).toBeGreaterThanOrEqual(now);
      const all = [...past, at];
      // the second ending at `at` contains at most perSecond starts including the new one
      expect(all.filter((t) => t > at - 1_000).length).toBeLessThanOrEqual(perSecond);
      // and it is the earliest such time: one ms earlier would be too soon (unless it is now)
      if (at > now) expect([...past, at - 1].filter((t) => t > at - 1 - 1_000).length).toBeGreaterThan(perSecond);
    },
  );
  test("no rate: start now", () => expect(nextStartAt(undefined, [1, 2, 3], 5)).toBe(5));
});

describe("MemoryLimits", () => {
  const holder = (i: number) => ({ workspaceId: "w", runId: `r${i}`, stepId: "s", attempt: 1 });
  const signal = () => new AbortController().signal;

  propTest.prop(
    [fc.integer({ min: 1, max: 3 }), fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 25 })],
    { numRuns: 60 },
  )("random holders: never above the limit, granted in arrival order", async (limit, holdTicks) => {
    const l = new MemoryLimits();
    const claim: LimitClaim = { kind: "resource", name: "api", limit };
    let inside = 0;
    let max = 0;
    const granted: number[] = [];
    const tick = () => new Promise((r) => setImmediate(r));
    await Promise.all(
      holdTicks.map(async (ticks, i) => {
        const p = await l.acquire([claim], holder(i), { signal: signal() });
        granted.push(i);
        inside++;
        max = Math.max(max, inside);
        for (let t = 0; t < ticks; t++) await tick();
        inside--;
        await p.release();
      }),
    );
    expect(max).toBeLessThanOrEqual(limit);
    expect(granted).toEqual(holdTicks.map((_, i) => i));
    expect(l.snapshot()).toEqual({});
  });

  test("two keys wanted in opposite orders by many holders: no deadlock, never overlapping", async () => {
    const l = new MemoryLimits();
    const a: LimitClaim = { kind: "serialKey", name: "a", limit: 1 };
    const b: LimitClaim = { kind: "serialKey", name: "b", limit: 1 };
    let inside = 0;
    let max = 0;
    await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const p = await l.acquire(i % 2 ? [a, b] : [b, a], holder(i), { signal: signal() });
        max = Math.max(max, ++inside);
        await new Promise((r) => setImmediate(r));
        inside--;
        await p.release();
      }),
    );
    expect(max).toBe(1);
  });

  test("an aborted waiter leaves the queue and releases what it took; the next waiter gets the key", async () => {
    const l = new MemoryLimits();
    const a: LimitClaim = { kind: "serialKey", name: "a", limit: 1 };
    const b: LimitClaim = { kind: "serialKey", name: "b", limit: 1 };
    const holdB = await l.acquire([b], holder(0), { signal: signal() });
    const ctl = new AbortController();
    const waits: LimitClaim[] = [];
    const aborted = l.acquire([a, b], holder(1), { signal: ctl.signal, onWait: (c) => waits.push(c) });
    await new Promise((r) => setImmediate(r));
    expect(waits).toEqual([b]); // it holds a and waits for b
    ctl.abort(new Error("cancelled"));
    await expect(aborted).rejects.toThrow("cancelled");
    const third = await l.acquire([a], holder(2), { signal: signal() }); // a was released
    await third.release();
    await holdB.release();
    expect(l.snapshot()).toEqual({});
  });
});
