/**
 * Lease fencing (README, Durability): a run is executed by the one process holding its lease. A
 * slow step keeps the lease renewed, so no other process takes the run over while it is alive;
 * an executor that is alive but lost its lease (a long pause, a partition) stops executing, and
 * its event writes are refused.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { z } from "zod";
import { defineSkill } from "../src/skills/contract.js";
import { LeaseLostError } from "../src/store/run-store.js";
import { postgresBackend } from "./helpers/backends.js";
import { waitFor } from "./helpers/wait.js";
import type { Runtime } from "../src/runtime/runtime.js";
import type { Database } from "../src/store/db.js";

const executions = new Map<string, number>();
const aborted = new Set<string>();
const gates = new Map<string, { entered: boolean; open: () => void; opened: Promise<void> }>();
function gate(name: string) {
  let g = gates.get(name);
  if (!g) {
    let open!: () => void;
    const opened = new Promise<void>((r) => (open = r));
    g = { entered: false, open, opened };
    gates.set(name, g);
  }
  return g;
}

const slow = defineSkill({
  name: "test.slow_write",
  description: "a non-idempotent write that takes a while (counts its executions)",
  input: z.object({ label: z.string(), ms: z.number().optional(), gate: z.string().optional() }),
  sideEffects: "write",
  idempotent: false,
  async execute(a, ctx) {
    executions.set(a.label, (executions.get(a.label) ?? 0) + 1);
    ctx.signal.addEventListener("abort", () => aborted.add(a.label), { once: true });
    if (a.gate) {
      const g = gate(a.gate);
      g.entered = true;
      await g.opened;
    }
    if (a.ms) await new Promise((r) => setTimeout(r, a.ms));
    return { label: a.label };
  },
});

describe(`lease fencing (${postgresBackend.name})`, () => {
  let a: Runtime;
  let b: Runtime;
  let db: Database;
  let close: () => Promise<void>;
  beforeAll(async () => {
    const pair = await postgresBackend.openPair({ leaseTtlMs: 400, decisionPollMs: 50 });
    ({ a, b, close } = pair);
    db = pair.db!;
    for (const r of [a, b]) r.registry.register(slow);
  }, 120_000);
  afterAll(async () => close?.());

  test("a step slower than the lease keeps it renewed: a second process polling for orphaned runs never takes it over", async () => {
    const stopB = b.startWorker({ pollMs: 50 });
    try {
      const h = a.run({
        steps: [
          { stepId: "s", skillName: "test.slow_write", arguments: { label: "renewed", ms: 2_000 } },
          { stepId: "t", skillName: "test.slow_write", dependsOn: ["s"], arguments: { label: "renewed-after" } },
        ],
      });
      const view = await h.result;
      expect(view.status).toBe("completed");
      expect(executions.get("renewed")).toBe(1);
      expect(executions.get("renewed-after")).toBe(1);
      const events = await a.events(h.runId);
      expect(events.filter((e) => e.type === "step_started").map((e) => e.stepId)).toEqual(["s", "t"]);
      expect(events.filter((e) => e.type === "run_completed")).toHaveLength(1);
    } finally {
      await stopB();
    }
  }, 120_000);

  test("an executor that lost its lease stops executing: its step is aborted, no successor starts, its event writes are refused", async () => {
    const h = a.run({
      steps: [
        { stepId: "s", skillName: "test.slow_write", arguments: { label: "fenced", gate: "fenced" } },
        { stepId: "t", skillName: "test.slow_write", dependsOn: ["s"], arguments: { label: "fenced-after" } },
      ],
    });
    h.result.catch(() => undefined);
    await waitFor(() => gate("fenced").entered, { timeoutMs: 60_000, what: "step s running" });
    // the start event is written beside the effect, not before it: take the snapshot once it landed
    await waitFor(async () => (await a.events(h.runId)).some((e) => e.type === "step_started" && e.stepId === "s"), {
      timeoutMs: 30_000,
      what: "s's start recorded",
    });
    const before = await a.events(h.runId);
    // another process took the run over while this one was paused (its lease looked expired)
    const runs = `"${db.schema}".tool_chain_runs`;
    await db.pool.query(
      `UPDATE ${runs} SET lease_owner = 'process-intruder', lease_expires_at = now() + interval '1 hour' WHERE run_id = $1`,
      [h.runId],
    );
    // the next heartbeat finds the lease gone and stops the drive: the running step is aborted
    await waitFor(() => aborted.has("fenced"), { timeoutMs: 30_000, what: "step s aborted after the lease was lost" });
    gate("fenced").open();
    // (the handle now follows the run's new owner: release it)
    h.release?.();
    await new Promise((r) => setTimeout(r, 1_000));
    expect(executions.get("fenced-after")).toBeUndefined();
    // nothing this executor wrote after losing the lease reached the history
    const after = await a.events(h.runId);
    expect(
      after
        .filter((e) => e.seq > before.at(-1)!.seq)
        .filter((e) => e.type === "step_completed" || e.type === "step_started"),
    ).toEqual([]);
    // and a write in its name is refused outright
    await expect(
      a.store.append(
        h.runId,
        [{ type: "step_started", stepId: "t", at: new Date().toISOString(), data: {}, key: "step_started:t:forged" }],
        a.owner,
      ),
    ).rejects.toBeInstanceOf(LeaseLostError);
    const { rows } = await db.pool.query(`SELECT lease_owner FROM ${runs} WHERE run_id = $1`, [h.runId]);
    expect(rows[0].lease_owner).toBe("process-intruder");
  }, 120_000);
});
