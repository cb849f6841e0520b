/**
 * Serial keys and resource limits across runs, on every backend (memory; Postgres embedded or
 * server): concurrent runs never overlap on a key and never exceed a limit (measured by the
 * skills themselves), a waiting step shows what it waits for and its timeout does not run,
 * waiters are served first come first served, a cancelled waiter leaves, rates per second hold,
 * and two keys wanted in opposite orders do not deadlock.
 */
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { LimitClaim } from "../src/kernel/limits.js";
import type { Runtime } from "../src/runtime/runtime.js";
import { defineSkill } from "../src/skills/contract.js";
import { abortableSleep } from "../skills/core/index.js";
import { backends } from "./helpers/backends.js";
import { settle, stepOf } from "./helpers/run.js";
import { Gates } from "./helpers/skills.js";
import { waitFor } from "./helpers/wait.js";

interface Span {
  runId: string;
  key: string;
  start: number;
  end: number;
}

/** Most spans of one key open at the same moment. */
function maxOverlap(spans: readonly Span[]): number {
  const points = spans
    .flatMap((s) => [[s.start, 1] as const, [s.end, -1] as const])
    .sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let cur = 0;
  let max = 0;
  for (const [, d] of points) max = Math.max(max, (cur += d));
  return max;
}

function limitSkills(spans: Span[], gates: Gates) {
  const record = async (key: string, runId: string, ms: number, signal: AbortSignal, gate?: string) => {
    const s: Span = { runId, key, start: performance.now(), end: Number.POSITIVE_INFINITY };
    spans.push(s);
    try {
      if (gate) await gates.wait(gate);
      else await abortableSleep(ms, signal);
    } finally {
      s.end = performance.now();
    }
    return key;
  };
  const input = z.object({ table: z.string(), ms: z.number().default(5), gate: z.string().optional() });
  return [
    defineSkill({
      name: "test.table_write",
      description: "writes to one table: never two at once",
      input,
      sideEffects: "write",
      idempotent: true,
      serialKey: (a: { table: string }) => a.table,
      execute: (a, ctx) => record(`table:${a.table}`, ctx.runId, a.ms, ctx.signal, a.gate),
    }),
    defineSkill({
      name: "test.provider_call",
      description: "calls a provider that allows 4 calls at once",
      input,
      sideEffects: "read",
      idempotent: true,
      resource: { name: "provider", limit: 4 },
      execute: (a, ctx) => record("provider", ctx.runId, a.ms, ctx.signal, a.gate),
    }),
    defineSkill({
      name: "test.rated_call",
      description: "a provider that allows 4 calls per second",
      input,
      sideEffects: "read",
      idempotent: true,
      resource: { name: "rated", limit: 100, perSecond: 4 },
      execute: (a, ctx) => record("rated", ctx.runId, a.ms, ctx.signal, a.gate),
    }),
  ];
}

describe.each(backends)("limits across runs on $name", (backend) => {
  const spans: Span[] = [];
  const gates = new Gates();
  let rt: Runtime;
  let close: () => Promise<void>;
  beforeAll(async () => {
    const o = await backend.open({ skills: limitSkills(spans, gates) });
    rt = o.runtime;
    close = o.close;
  }, 180_000);
  afterAll(async () => {
    for (const g of ["hold", "hold-fifo", "hold-cancel"]) gates.open(g);
    await close?.();
  }, 180_000);

  test("2 and 10 concurrent runs never overlap on a table and never exceed the provider's limit", async () => {
    for (const n of [2, 10]) {
      spans.length = 0;
      const plan = {
        steps: [
          { stepId: "w1", skillName: "test.table_write", arguments: { table: "t1", ms: 10 } },
          { stepId: "w2", skillName: "test.table_write", dependsOn: ["w1"], arguments: { table: "t2", ms: 5 } },
          ...["p1", "p2", "p3"].map((id) => ({
            stepId: id,
            skillName: "test.provider_call",
            arguments: { table: "-", ms: 15 },
          })),
        ],
      };
      const views = await Promise.all(Array.from({ length: n }, () => settle(rt.run(plan)).then((r) => r.view)));
      expect(views.map((v) => v.status)).toEqual(Array(n).fill("completed"));
      const of = (key: string) => spans.filter((s) => s.key === key);
      expect(of("table:t1")).toHaveLength(n);
      expect(maxOverlap(of("table:t1"))).toBe(1);
      expect(maxOverlap(of("table:t2"))).toBe(1);
      expect(of("provider")).toHaveLength(3 * n);
      expect(maxOverlap(of("provider"))).toBeLessThanOrEqual(4);
      if (n === 10) expect(maxOverlap(of("provider"))).toBeGreaterThan(1); // the limit is a limit, not a lock
    }
  }, 180_000);

  test("a waiting step stays pending with waitingFor and an event; its timeout starts when it runs", async () => {
    const holder = rt.run({
      steps: [{ stepId: "h", skillName: "test.table_write", arguments: { table: "tw", gate: "hold" } }],
    });
    await gates.untilEntered("hold", 60_000);
    const waiter = rt.run({
      steps: [
        {
          stepId: "x",
          skillName: "test.table_write",
          arguments: { table: "tw", ms: 1 },
          timeoutMs: 300,
          retry: { maxAttempts: 1 },
        },
      ],
    });
    const view = await waitFor(
      async () => {
        const v = await rt.getRun(waiter.runId);
        return stepOf(v, "x").waitingFor ? v : undefined;
      },
      { what: "step x waiting for table tw", retryErrors: true, timeoutMs: 60_000 },
    );
    expect(stepOf(view, "x")).toMatchObject({ status: "pending", waitingFor: { serialKey: "tw" }, attempts: 0 });
    // longer than the step's timeout: waiting does not count
    const t = Date.now();
    await waitFor(() => Date.now() > t + 600, { what: "the clock passing the step's timeout" });
    gates.open("hold");
    const [done] = await Promise.all([settle(waiter), settle(holder)]);
    expect(done.view.status).toBe("completed");
    expect(stepOf(done.view, "x")).toMatchObject({ status: "completed", waitingFor: null });
    const events = await rt.events(waiter.runId);
    const types = events.filter((e) => e.stepId === "x").map((e) => e.type);
    expect(types).toEqual(["step_waiting_for_limit", "step_started", "step_completed"]);
    expect(events.find((e) => e.type === "step_waiting_for_limit")!.data).toEqual({
      attempt: 1,
      waitingFor: { serialKey: "tw" },
    });
  }, 180_000);

  test("waiters are served first come, first served", async () => {
    spans.length = 0;
    const holder = rt.run({
      steps: [{ stepId: "h", skillName: "test.table_write", arguments: { table: "tf", gate: "hold-fifo" } }],
    });
    await gates.untilEntered("hold-fifo", 60_000);
    const waiters: string[] = [];
    const handles = [];
    for (let i = 0; i < 5; i++) {
      const h = rt.run({ steps: [{ stepId: "x", skillName: "test.table_write", arguments: { table: "tf", ms: 1 } }] });
      handles.push(h);
      waiters.push(h.runId);
      // the next run arrives only once this one is queued
      await waitFor(async () => Boolean(stepOf(await rt.getRun(h.runId), "x").waitingFor), {
        what: `run ${i} queued`,
        retryErrors: true,
        timeoutMs: 60_000,
      });
    }
    gates.open("hold-fifo");
    await Promise.all([holder, ...handles].map((h) => settle(h)));
    expect(spans.filter((s) => s.key === "table:tf").map((s) => s.runId)).toEqual([holder.runId, ...waiters]);
  }, 180_000);

  test("cancelling a run whose step waits for a key: the step is cancelled without running; the key's queue moves on", async () => {
    spans.length = 0;
    const holder = rt.run({
      steps: [{ stepId: "h", skillName: "test.table_write", arguments: { table: "tc", gate: "hold-cancel" } }],
    });
    await gates.untilEntered("hold-cancel", 60_000);
    const doomed = rt.run({
      steps: [{ stepId: "x", skillName: "test.table_write", arguments: { table: "tc", ms: 1 } }],
    });
    await waitFor(async () => stepOf(await rt.getRun(doomed.runId), "x").waitingFor !== null, {
      what: "the doomed step queued",
      retryErrors: true,
      timeoutMs: 60_000,
    });
    const after = rt.run({
      steps: [{ stepId: "y", skillName: "test.table_write", arguments: { table: "tc", ms: 1 } }],
    });
    await waitFor(async () => stepOf(await rt.getRun(after.runId), "y").waitingFor !== null, {
      what: "the next step queued",
      retryErrors: true,
      timeoutMs: 60_000,
    });
    await rt.cancel(doomed.runId, "no longer needed");
    const cancelled = await settle(doomed);
    expect(cancelled.view.status).toBe("cancelled");
    expect(stepOf(cancelled.view, "x").status).toBe("cancelled");
    gates.open("hold-cancel");
    expect((await settle(after)).view.status).toBe("completed");
    await settle(holder);
    expect(spans.filter((s) => s.key === "table:tc").map((s) => s.runId)).toEqual([holder.runId, after.runId]);
  }, 180_000);

  test("perSecond: no rolling second holds more starts than the resource allows", async () => {
    spans.length = 0;
    const views = await Promise.all(
      Array.from({ length: 9 }, () =>
        settle(
          rt.run({ steps: [{ stepId: "r", skillName: "test.rated_call", arguments: { table: "-", ms: 1 } }] }),
        ).then((r) => r.view),
      ),
    );
    expect(views.map((v) => v.status)).toEqual(Array(9).fill("completed"));
    const starts = spans
      .filter((s) => s.key === "rated")
      .map((s) => s.start)
      .sort((a, b) => a - b);
    expect(starts).toHaveLength(9);
    // measured by the skill: the i-th and (i+4)-th start are a second apart. The window is enforced
    // when a start is granted; the skill sees it a scheduling delay later, so a pair can look
    // closer by that delay (without the rate all 9 start within milliseconds of each other)
    for (let i = 0; i + 4 < starts.length; i++) expect(starts[i + 4]! - starts[i]!).toBeGreaterThan(750);
    expect(starts[8]! - starts[0]!).toBeGreaterThan(1_750);
  }, 180_000);

  test("two keys wanted in opposite orders by many holders at once: no deadlock, no overlap", async () => {
    const a: LimitClaim = { kind: "serialKey", name: "dl-a", limit: 1 };
    const b: LimitClaim = { kind: "serialKey", name: "dl-b", limit: 1 };
    const coordinator = rt.env.limits!.coordinator;
    let inside = 0;
    let max = 0;
    await Promise.all(
      Array.from({ length: 12 }, async (_, i) => {
        const p = await coordinator.acquire(
          i % 2 ? [a, b] : [b, a],
          { workspaceId: "dl", runId: `r${i}`, stepId: "s", attempt: 1 },
          { signal: new AbortController().signal },
        );
        max = Math.max(max, ++inside);
        await new Promise((r) => setTimeout(r, 2));
        inside--;
        await p.release();
      }),
    );
    expect(max).toBe(1);
  }, 180_000);
});
