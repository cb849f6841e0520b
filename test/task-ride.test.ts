/**
 * A step's events in its task's result write (src/runtime/task-ride.ts), on the database:
 * - a chain of steps that take time stores each step's result with the events it led to
 *   (`step_completed`, the next `step_started`) in one statement: about one statement per step
 *   where there were two (the write, then an append waiting for it); every event once, in order;
 * - a task ride whose statement fails commits neither: the drive fails and is re-driven; the
 *   step whose result was lost claimed its intent, so it is reconciled (a person asked), never
 *   run again; every effect at most once, every event once.
 * The interleavings themselves (never an event ahead of the result it reports, no deadlock) are
 * test/event-batches.property.test.ts's.
 */
import { describe, expect, test } from "vitest";
import { countStatements } from "../src/store/commit-points.js";
import type { AppendRider } from "../src/store/run-store.js";
import { EffectLedger, effectSkill } from "./helpers/skills.js";
import { closing, openOwnRuntime, type OwnRuntime } from "./helpers/own-runtime.js";
import { waitFor } from "./helpers/wait.js";

const STEPS = 12;
const timedChain = (ms: number) => ({
  steps: Array.from({ length: STEPS }, (_, i) => ({
    stepId: `s${i}`,
    skillName: "t.send",
    dependsOn: i ? [`s${i - 1}`] : [],
    arguments: { label: `s${i}`, ms },
  })),
});

async function eventsOf(o: OwnRuntime, runId: string) {
  const events = await o.runtime.store.list(runId);
  return { keys: events.map((e) => e.key), seqs: events.map((e) => e.seq) };
}

async function everyEventOnce(o: OwnRuntime, runId: string) {
  const { keys, seqs } = await eventsOf(o, runId);
  expect(new Set(keys).size).toBe(keys.length);
  expect(seqs).toEqual(keys.map((_, i) => i + 1));
  for (let i = 0; i < STEPS; i++) {
    expect(keys.filter((k) => k.startsWith(`step_started:s${i}:`))).toHaveLength(1);
    expect(keys.filter((k) => k.startsWith(`step_completed:s${i}:`))).toHaveLength(1);
  }
  expect(keys.filter((k) => k.startsWith("run_completed"))).toHaveLength(1);
}

describe("a step's events in its result's statement", () => {
  test("a chain of timed steps: about one statement per step, every event once and in order", async () => {
    const ledger = new EffectLedger();
    // idempotent: no intent is claimed before each effect (one statement per step of its own)
    const o = await openOwnRuntime("tr", [effectSkill(ledger, { name: "t.send", idempotent: true })]);
    await closing(o, async () => {
      await o.runtime.run(timedChain(1)).result; // warm-up
      const count = countStatements(o.db.pool);
      const v = await o.runtime.run(timedChain(40)).result;
      count.stop();
      expect(v.status).toBe("completed");
      const carried = count.statements.filter(
        (w) => w.includes("insert.checkpoint_writes") && w.includes("insert.tool_chain_event_logs"),
      );
      // each step's result with its events. Timing may send some on their own: on a loaded
      // machine a batch still being stored when the next result is put leaves that result to go
      // alone, and the events pile up for the batch after it. Without the ride: 2 statements per
      // step, 31 for this run (measured), and no result carries an event.
      expect(carried.length, JSON.stringify(count.statements)).toBeGreaterThanOrEqual(STEPS / 2);
      expect(count.roundTrips).toBeLessThanOrEqual(1.5 * STEPS + 7);
      await everyEventOnce(o, v.runId);
    });
  }, 120_000);

  test("a task ride whose statement fails commits neither; the re-drive asks about the step whose result was lost, never runs it again; every event once", async () => {
    const ledger = new EffectLedger();
    const o = await openOwnRuntime("trf", [effectSkill(ledger, { name: "t.send" })], {
      driveRetry: { maxFailures: 3, initialMs: 10, maxMs: 20 },
    });
    await closing(o, async () => {
      await o.db.pool.query(
        `CREATE FUNCTION "${o.db.schema}".transient_failure() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'could not serialize' USING ERRCODE = '40001'; END $$`,
      );
      // the third rider sent fails: it carries a task's result (the scheduler node's own writes
      // come last, after every step), so s1's or s2's result is not saved either
      let sent = 0;
      const store = o.runtime.store as { appendRider?: (...a: never[]) => AppendRider | undefined };
      const orig = store.appendRider!.bind(store);
      store.appendRider = (...a: never[]) => {
        const r = orig(...a);
        return (
          r && {
            ...r,
            sql: (base: number) =>
              ++sent === 3
                ? { ...r.sql(base), select: `SELECT "${o.db.schema}".transient_failure() AS runs` }
                : r.sql(base),
          }
        );
      };
      const failures: string[] = [];
      const record = o.runtime.store.recordDriveFailure.bind(o.runtime.store);
      o.runtime.store.recordDriveFailure = async (...a) => (failures.push(a[2].message), record(...a));
      const h = o.runtime.run(timedChain(15));
      await h.result.catch(() => undefined);
      // the step whose result was lost had claimed its intent before its effect: it may have
      // happened, so it is never run again but reconciled; t.send cannot tell, so a person is asked
      const row = await waitFor(
        async () => {
          const row = await o.runtime.store.getRow(h.runId);
          return row?.status === "waiting_confirmation" && !row.leaseOwner ? row : undefined;
        },
        { what: "the run waits for a person", timeoutMs: 10_000, intervalMs: 50 },
      );
      expect(sent).toBeGreaterThanOrEqual(3);
      expect(failures).toEqual([expect.stringMatching(/could not serialize/)]);
      expect(row.pendingConfirmations).toEqual([expect.objectContaining({ kind: "in_doubt", inDoubt: true })]);
      const lost = Number(row.pendingConfirmations[0]!.stepId.slice(1));
      // every step up to it had its effect once; the chain went on while its write was out (a
      // result is saved in the background, as in LangGraph), so the next one may have had its
      // effect too: at most once, and its claimed intent has it reconciled when the run goes on
      for (let i = 0; i < STEPS; i++) {
        const n = ledger.effects.get(`${h.runId}:s${i}`) ?? 0;
        if (i <= lost) expect(n).toBe(1);
        else expect(n).toBeLessThanOrEqual(1);
      }
      const { keys, seqs } = await eventsOf(o, h.runId);
      expect(new Set(keys).size).toBe(keys.length);
      expect(seqs).toEqual(keys.map((_, i) => i + 1));
      // the steps before it completed once each (their results and events committed together)
      for (let i = 0; i < lost; i++) expect(keys.filter((k) => k.startsWith(`step_completed:s${i}:`))).toHaveLength(1);
      expect(keys.filter((k) => k.startsWith(`step_completed:s${lost}:`))).toHaveLength(0);
      await o.runtime.cancel(h.runId, "test done");
    });
  }, 120_000);
});
