/**
 * A process killed right after a cancel request was saved (the commit that stores it on the run
 * row), with real processes on the configured database. The step that completed before the
 * cancel had its result saved, but the checkpoint the recovery starts from does not show it
 * completed: recovery must take that result back before it applies the cancel, so the step's
 * write is compensated exactly once (before the fix it ended "cancelled" and its write stayed).
 */
import { afterAll, expect, test } from "vitest";
import pg from "pg";
import { serverUrl } from "./helpers/backends.js";
import { runToEnd, sharedStorage, spawnChild, type ChildEnv } from "./helpers/child.js";
import type { Report } from "./faults/invariants.js";

const CHILD = "test/fixtures/fault-child.ts";
const schemas: string[] = [];
afterAll(async () => {
  if (!serverUrl) return;
  const pool = new pg.Pool({ connectionString: serverUrl, max: 1 });
  for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
  await pool.end();
});
function storage(): ChildEnv {
  const s = sharedStorage();
  schemas.push(s.schema);
  return s;
}

test("killed right after the cancel was saved: the completed write is compensated once, the rest never runs", async () => {
  const st = storage();
  const runId = "cancel-saved-then-killed";
  // a: a write with a compensation; stop: asks for its own run's cancel; c: never reached
  const first = spawnChild(
    st,
    ["start", "cancel_mid_run", runId],
    {
      TOOLCHAIN_FAULT: "db_commit:update.tool_chain_runs(cancel_reason):1",
    },
    CHILD,
  );
  await first.exited;
  expect(first.proc.signalCode, first.stderr().slice(-1500)).toBe("SIGKILL");

  const lines = await runToEnd(st, ["resume", "cancel_mid_run", runId], 120_000, CHILD);
  const r = (lines.find((l) => "report" in l) as { report: Report }).report;
  expect(r.pre?.completed ?? [], "the kill came before the step's completion was shown").not.toContain("stop");
  expect(r.status).toBe("cancelled");
  expect(r.effects.filter((e) => e.step === "a" && e.kind === "write")).toHaveLength(1);
  expect(r.undos.filter((u) => u.step === "a" && u.ok)).toHaveLength(1);
  expect(r.effects.filter((e) => e.step === "c")).toEqual([]);
  const a = r.steps.find((s) => s.stepId === "a")!;
  expect({ status: a.status, rollback: a.rollback?.status }).toEqual({
    status: "rolled_back",
    rollback: "rolled_back",
  });
  expect(r.steps.find((s) => s.stepId === "c")!.status).toBe("cancelled");
  expect(r.row?.leaseOwner ?? null).toBeNull();
}, 300_000);
