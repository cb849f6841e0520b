/**
 * Crash recovery with real processes killed by SIGKILL, on the configured database (server
 * Postgres with DATABASE_URL, else embedded PGlite on disk). Effects are rows counted in the
 * same database: every completed step ran exactly once, no non-idempotent effect twice.
 */
import { afterAll, describe, expect, test } from "vitest";
import pg from "pg";
import { runToEnd, sharedStorage, spawnChild, type ChildEnv } from "./helpers/child.js";
import { serverUrl } from "./helpers/backends.js";

interface Report {
  report: {
    status: string;
    steps: { stepId: string; status: string; attempts: number; output: unknown }[];
    pending: { stepId: string; inDoubt?: boolean }[];
    seqs: number[];
    types: string[];
  };
  effects: { key: string; label: string; pid: number }[];
}
const reportOf = (lines: Record<string, unknown>[]) => lines.filter((l) => "report" in l).at(-1) as unknown as Report;
const countBy = (effects: Report["effects"]) =>
  effects.reduce<Record<string, number>>((m, e) => ((m[e.label] = (m[e.label] ?? 0) + 1), m), {});
function expectGapless(r: Report) {
  expect(r.report.seqs).toEqual(r.report.seqs.map((_, i) => i + 1));
}

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

describe("crash recovery (SIGKILL)", () => {
  test("killed during an idempotent step: the run continues elsewhere; completed steps and effects happen once", async () => {
    const st = storage();
    const runId = "crash-idem";
    const plan = {
      steps: [
        { stepId: "a", skillName: "test.db_effect", arguments: { label: "a" } },
        { stepId: "b", skillName: "core.wait", dependsOn: ["a"], arguments: { ms: 1_500 } },
        { stepId: "c", skillName: "test.db_effect", dependsOn: ["b"], arguments: { label: "c" } },
      ],
    };
    const first = spawnChild(st, ["start", JSON.stringify(plan), runId]);
    await first.waitFor((l) => l.event === "step_started" && l.stepId === "b");
    first.proc.kill("SIGKILL");
    await first.exited;
    const lines = await runToEnd(st, ["recover"]);
    const r = reportOf(lines);
    expect(r.report.status).toBe("completed");
    expect(countBy(r.effects)).toEqual({ a: 1, c: 1 });
    expectGapless(r);
  }, 120_000);

  test("killed during a non-idempotent effect with no way to reconcile: in doubt, never re-executed; a human marks it done from another process", async () => {
    const st = storage();
    const runId = "crash-doubt";
    const plan = {
      steps: [
        { stepId: "send", skillName: "test.db_effect", arguments: { label: "send", ms: 30_000 } },
        { stepId: "after", skillName: "test.db_effect", dependsOn: ["send"], arguments: { label: "after" } },
      ],
    };
    const first = spawnChild(st, ["start", JSON.stringify(plan), runId]);
    await first.waitFor((l) => l.effect === `${runId}:send`);
    first.proc.kill("SIGKILL");
    await first.exited;

    const recovered = reportOf(await runToEnd(st, ["recover"]));
    expect(recovered.report.status).toBe("waiting_confirmation");
    expect(recovered.report.pending).toEqual([expect.objectContaining({ stepId: "send", inDoubt: true, round: 1 })]);
    expect(countBy(recovered.effects)).toEqual({ send: 1 });

    const done = reportOf(
      await runToEnd(st, [
        "confirm",
        runId,
        JSON.stringify({ stepId: "send", decision: "mark_done", output: { label: "send", manual: true } }),
      ]),
    );
    expect(done.report.status).toBe("completed");
    expect(done.report.steps.find((x) => x.stepId === "send")).toMatchObject({
      status: "completed",
      output: { label: "send", manual: true },
    });
    expect(countBy(done.effects)).toEqual({ send: 1, after: 1 });
    expectGapless(done);
  }, 120_000);

  test("killed during a reconcilable effect: the skill's reconcile settles it without a human and without a second effect", async () => {
    const st = storage();
    const runId = "crash-reconcile";
    const plan = {
      steps: [
        { stepId: "write", skillName: "test.db_effect_rec", arguments: { label: "write", ms: 30_000 } },
        { stepId: "next", skillName: "test.db_effect", dependsOn: ["write"], arguments: { label: "next" } },
      ],
    };
    const first = spawnChild(st, ["start", JSON.stringify(plan), runId]);
    await first.waitFor((l) => l.effect === `${runId}:write`);
    first.proc.kill("SIGKILL");
    await first.exited;
    const r = reportOf(await runToEnd(st, ["recover"]));
    expect(r.report.status).toBe("completed");
    expect(r.report.steps.find((x) => x.stepId === "write")!.output).toEqual({ label: "write", reconciled: true });
    expect(countBy(r.effects)).toEqual({ write: 1, next: 1 });
    expectGapless(r);
  }, 120_000);

  test("killed while waiting for confirmation: another process approves; the effect happens once", async () => {
    const st = storage();
    const runId = "crash-waiting";
    const plan = {
      steps: [
        { stepId: "prep", skillName: "test.db_effect", arguments: { label: "prep" } },
        { stepId: "pub", skillName: "test.publish", dependsOn: ["prep"], arguments: { title: "launch" } },
      ],
    };
    const first = spawnChild(st, ["start", JSON.stringify(plan), runId]);
    await first.waitFor((l) => l.event === "run_waiting_confirmation");
    first.proc.kill("SIGKILL");
    await first.exited;
    const r = reportOf(await runToEnd(st, ["confirm", runId, JSON.stringify({ stepId: "pub", decision: "approve" })]));
    expect(r.report.status).toBe("completed");
    expect(countBy(r.effects)).toEqual({ prep: 1, "publish:launch": 1 });
    expectGapless(r);
  }, 120_000);

  test("killed in the middle of a rollback: the rollback resumes; finished compensations are not run again", async () => {
    const st = storage();
    const runId = "crash-rollback";
    const plan = {
      onFailure: "fail_fast",
      steps: [
        { stepId: "c1", skillName: "test.db_effect_comp", arguments: { label: "c1", undoMs: 0 } },
        {
          stepId: "c2",
          skillName: "test.db_effect_comp",
          dependsOn: ["c1"],
          arguments: { label: "c2", undoMs: 30_000 },
        },
        { stepId: "c3", skillName: "test.db_effect_comp", dependsOn: ["c2"], arguments: { label: "c3", undoMs: 0 } },
        { stepId: "boom", skillName: "core.fail", dependsOn: ["c3"], retry: { maxAttempts: 1 } },
      ],
    };
    const first = spawnChild(st, ["start", JSON.stringify(plan), runId], { SLOW_UNDO: "1" });
    await first.waitFor((l) => l.undoing === "c2"); // c3 was undone; c2's compensation is running
    first.proc.kill("SIGKILL");
    await first.exited;
    const lines = await runToEnd(st, ["recover"], 90_000);
    const r = reportOf(lines);
    const undo = lines.find((l) => "undos" in l) as unknown as { undos: string[]; undoCalls: { label: string }[] };
    expect(r.report.status).toBe("rolled_back");
    expect(undo.undos).toEqual(["c1", "c2", "c3"]);
    const calls = undo.undoCalls.map((c) => c.label);
    // c3 finished before the crash: replayed from the checkpoint, not run again; c2 was in flight
    // and runs again with the same idempotency key; c1 runs once
    expect(calls.filter((x) => x === "c3")).toHaveLength(1);
    expect(calls.filter((x) => x === "c1")).toHaveLength(1);
    expect(calls.filter((x) => x === "c2")).toHaveLength(2);
    expectGapless(r);
  }, 150_000);
});
