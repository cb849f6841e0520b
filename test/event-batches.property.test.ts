/**
 * The drive's event batches (src/runtime/event-batches.ts) under generated interleavings of
 * events, task writes, nodes ending (their events offered to ride in their writes' statement, the
 * ride's condition holding or not, its statement failing), a final checkpoint asking whether it
 * may carry the run's projection, and the drive's drain. Every async step of the fakes resolves
 * after a generated number of macrotasks, so the interleavings are the generator's.
 *
 * What must hold in every one:
 * - every event is stored exactly once, in the order it was emitted (batches, rides, fallbacks);
 *   a ride's failed statement stops the drive: what was stored then is the events emitted first;
 * - a node's writes commit only with its events (riding) or after them (stored first): never ahead;
 * - a functional task's result write (src/runtime/task-ride.ts, the real wrapper over a fake saver)
 *   carries the events buffered when it is put or goes on its own: an event reporting a task's
 *   result is stored with that result's statement or after it committed, never before;
 * - a ride's statement starts only after the task writes in flight when it was claimed settled;
 * - a final checkpoint told "all stored" (after waiting for every batch) finds every event emitted so far stored;
 * - nothing deadlocks: every put, every final checkpoint and the drain settle.
 */
import { fc, test } from "@fast-check/vitest";
import { describe, expect } from "vitest";
import { EventBatches } from "../src/runtime/event-batches.js";
import { EVENTS_RIDE_KEY } from "../src/kernel/node-rides.js";
import type { EmittedEvent, RunEvent } from "../src/kernel/events.js";
import type { AppendRider } from "../src/store/run-store.js";
import { rideTaskWrites } from "../src/runtime/task-ride.js";
import type { WriteBarrier } from "../src/runtime/write-barrier.js";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import type { StatementRider } from "../src/store/statement-rider.js";

type Op =
  | { kind: "emit" }
  | { kind: "write"; ticks: number }
  | { kind: "task"; ticks: number; after: number; next: boolean }
  | { kind: "node"; events: number; ticks: number; applies: boolean; fails: boolean }
  | { kind: "final"; ticks: number }
  | { kind: "wait"; ticks: number };

const ticks = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ kind: "emit" as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("write" as const), ticks: fc.integer({ min: 0, max: 4 }) }) },
  {
    weight: 3,
    // a task's result is put; `after` microtasks later the scheduler reports it (and, `next`, starts another)
    arbitrary: fc.record({
      kind: fc.constant("task" as const),
      ticks: fc.integer({ min: 0, max: 4 }),
      after: fc.integer({ min: 0, max: 3 }),
      next: fc.boolean(),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("node" as const),
      events: fc.integer({ min: 0, max: 3 }),
      ticks: fc.integer({ min: 0, max: 4 }),
      applies: fc.boolean(),
      fails: fc.oneof({ weight: 5, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("final" as const), ticks: fc.integer({ min: 0, max: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("wait" as const), ticks: fc.integer({ min: 0, max: 3 }) }) },
);

/** How often a task's result carried events, and went alone, across the property's runs. */
const coverage = { taskRides: 0, taskAlone: 0 };

async function simulate(ops: Op[], delays: number[], canRide: boolean) {
  let d = 0;
  const delay = () => delays[d++ % delays.length]!;
  const inflight = new Set<Promise<unknown>>();
  const track = <T>(p: Promise<T>): Promise<T> => {
    inflight.add(p);
    const done = () => inflight.delete(p);
    p.then(done, done);
    return p;
  };
  const emitted: string[] = [];
  const stored: string[] = [];
  const violations: string[] = [];
  const settledWrites = new Set<Promise<unknown>>();
  // an event reporting a task's result, and the results committed
  const reports = new Map<string, string>();
  const committedResults = new Set<string>();
  const ahead = (keys: string[], self?: string) => {
    for (const k of keys) {
      const w = reports.get(k);
      if (w !== undefined && w !== self && !committedResults.has(w))
        violations.push(`${k} stored before the result of ${w} it reports`);
    }
  };
  const finals = new Set<Promise<unknown>>();
  const numbered = (batch: EmittedEvent[]): RunEvent[] => batch.map((e) => ({ ...e, runId: "r", seq: 0 }));
  // whether the next ride's condition holds / its statement fails (set per node op)
  let applies = true;
  let fails = false;
  const batches = new EventBatches({
    settled: async () => {
      await ticks(1);
      await Promise.allSettled([...inflight].filter((w) => !finals.has(w)));
    },
    append: async (batch) => {
      ahead(batch.map((e) => e.key));
      await ticks(delay());
      stored.push(...batch.map((e) => e.key));
      return numbered(batch);
    },
    ...(canRide
      ? {
          rider: (batch: EmittedEvent[]): AppendRider & { keys: string[] } => {
            const ok = applies;
            let applied = false;
            return {
              keys: batch.map((e) => e.key),
              params: [],
              guard: "true",
              sql: () => ({ ctes: "", select: "" }),
              committed: () => {
                applied = ok;
                if (ok) stored.push(...batch.map((e) => e.key));
              },
              numbered: () => (applied ? numbered(batch) : undefined),
            };
          },
        }
      : {}),
    stored: () => undefined,
    failed: () => undefined,
  });
  let n = 0;
  const emit = () => {
    const key = `e${n++}`;
    emitted.push(key);
    batches.push({ type: "step_started", at: "", data: {}, key });
    return key;
  };
  const pending: Promise<unknown>[] = [];
  let task = 0;
  for (const op of ops) {
    if (op.kind === "emit") emit();
    else if (op.kind === "write") {
      const w = track(ticks(op.ticks));
      void w.then(() => settledWrites.add(w));
    } else if (op.kind === "task") {
      const taskId = `task${task++}`;
      const statement = async (rider: StatementRider | undefined) => {
        const keys = (rider as { keys?: string[] } | undefined)?.keys ?? [];
        ahead(keys, taskId);
        if (keys.length) coverage.taskRides++;
        else coverage.taskAlone++;
        await ticks(op.ticks);
        committedResults.add(taskId);
        rider?.committed({});
      };
      const saver = {
        putWrites: () => statement(undefined),
        putWritesWith: (_c: unknown, _w: unknown, _t: unknown, rider?: StatementRider) => statement(rider),
      } as unknown as BaseCheckpointSaver;
      // the barrier tracks task and node writes, not checkpoints (a final one is no write here)
      const barrier = {
        inflightNow: () => new Set([...inflight].filter((x) => !finals.has(x))),
      } as unknown as WriteBarrier;
      const wrapped = rideTaskWrites(saver, barrier);
      // as the write barrier does: the write is tracked once put
      const w = track(
        wrapped.putWrites(
          { configurable: { thread_id: "r", checkpoint_ns: "", [EVENTS_RIDE_KEY]: batches } },
          [["__return__", { ok: true }]],
          taskId,
        ),
      );
      void w.then(
        () => settledWrites.add(w),
        () => settledWrites.add(w),
      );
      pending.push(w.catch(() => undefined));
      // the scheduler sees the result in the microtasks that follow and reports it
      void (async () => {
        for (let i = 0; i < op.after; i++) await Promise.resolve();
        const key = emit();
        reports.set(key, taskId);
        if (op.next) emit();
      })();
    } else if (op.kind === "wait") await ticks(op.ticks);
    else if (op.kind === "final") {
      // a final checkpoint: tracked like every write, asking first whether it may carry the projection
      // it holds the state of what was emitted before it
      const upTo = emitted.length;
      const final = track(
        (async () => {
          if (await batches.storedAll()) {
            const missing = emitted.slice(0, upTo).filter((k) => !batches.persisted.has(k));
            if (missing.length) violations.push(`final checkpoint told all stored, missing ${missing}`);
          } else if (batches.failure === undefined)
            violations.push("final checkpoint not told all stored, nothing failed");
          await ticks(op.ticks);
        })(),
      );
      finals.add(final);
      pending.push(final);
    } else {
      const taskId = `node${task++}`;
      const keys = Array.from({ length: op.events }, emit);
      applies = op.applies;
      fails = op.fails;
      const failsNow = fails;
      // the task writes in flight as the node ends (a final checkpoint's is not one: none is in flight then)
      const before = [...inflight].filter((w) => !finals.has(w));
      // what LangGraph does once the node returned: its writes, claimed by the ride it offered
      const put = async (rider: AppendRider | undefined, claimed: boolean) => {
        // (stored first, the events themselves waited for the writes they report)
        if (claimed && before.some((w) => !settledWrites.has(w) && inflight.has(w)))
          violations.push(`${taskId}: its writes started before the task writes it reports settled`);
        if (!rider && keys.some((k) => !batches.persisted.has(k)))
          violations.push(`${taskId}: writes without its events stored`);
        await ticks(delay());
        if (rider && failsNow) throw new Error("statement failed");
        rider?.committed({});
      };
      const wrote = batches.offer(taskId, keys)
        ? (batches.claim(taskId, (r) => track(put(r as AppendRider | undefined, true))) ?? put(undefined, false))
        : batches.whenStored(keys).then(() => put(undefined, false));
      pending.push(wrote.catch(() => undefined));
      await ticks(op.ticks);
    }
  }
  const all = Promise.allSettled(pending).then(() => batches.drain());
  const timeout = new Promise((_, reject) => setTimeout(() => reject(new Error("deadlock")), 2_000));
  await Promise.race([all.catch(() => undefined), timeout]);
  return { emitted, stored, violations, failed: batches.failure !== undefined };
}

describe("event batches and node rides", () => {
  test.prop(
    [
      fc.array(opArb, { maxLength: 40 }),
      fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 8 }),
      fc.boolean(),
    ],
    {
      numRuns: 1000,
    },
  )(
    "every event once and in order; a node's writes never ahead of its events; no deadlock",
    async (ops, delays, canRide) => {
      const { emitted, stored, violations, failed } = await simulate(ops, delays, canRide);
      expect(violations).toEqual([]);
      // a failed statement stops the drive: what was stored is what came first, nothing after it
      if (failed) expect(stored).toEqual(emitted.slice(0, stored.length));
      else expect(stored).toEqual(emitted);
    },
  );
  test("the generated runs put task results both carrying events and alone", () => {
    expect(coverage.taskRides).toBeGreaterThan(50);
    expect(coverage.taskAlone).toBeGreaterThan(50);
  });
});
