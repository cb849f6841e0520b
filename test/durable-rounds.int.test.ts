/**
 * Decisions and durable tasks keyed by what they are (step, kind, attempt, round), proven with
 * real processes killed right after named database commits (TOOLCHAIN_FAULT, src/store/commit-points.ts) on the configured database.
 * Each of these ran a non-idempotent effect twice before the fix.
 */
import { afterAll, describe, expect, test } from "vitest";
import pg from "pg";
import { runToEnd, sharedStorage, spawnChild, type ChildEnv } from "./helpers/child.js";
import { serverUrl } from "./helpers/backends.js";

interface Report {
  report: {
    status: string;
    steps: { stepId: string; status: string; attempts: number; output: unknown }[];
    pending: { stepId: string; inDoubt?: boolean; round?: number }[];
    seqs: number[];
    types: string[];
  };
  effects: { key: string; label: string; pid: number }[];
}
const reportOf = (lines: Record<string, unknown>[]) => lines.filter((l) => "report" in l).at(-1) as unknown as Report;
const countBy = (effects: Report["effects"]) =>
  effects.reduce<Record<string, number>>((m, e) => ((m[e.label] = (m[e.label] ?? 0) + 1), m), {});

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
/** A child that SIGKILLs itself at a fault point. */
async function killedAt(st: ChildEnv, args: string[], fault: string): Promise<void> {
  const c = spawnChild(st, args, { TOOLCHAIN_FAULT: fault });
  const code = await c.exited;
  expect(
    code,
    `the child should die at ${fault}; stderr: ${c.stderr().slice(-800)}; lines: ${JSON.stringify(c.lines).slice(-800)}`,
  ).toBeNull();
}

describe("decisions answer one wait; durable tasks are per attempt and round", () => {
  test("a stale approval never re-runs an in-doubt effect: approving another step leaves it waiting", async () => {
    const st = storage();
    const runId = "stale-approval";
    const plan = {
      steps: [
        { stepId: "x", skillName: "test.db_effect", arguments: { label: "x" }, requireConfirmation: true },
        { stepId: "y", skillName: "core.pass", arguments: { value: 1 }, requireConfirmation: true },
      ],
    };
    const waiting = reportOf(await runToEnd(st, ["start", JSON.stringify(plan), runId]));
    expect(waiting.report.pending.map((p) => p.stepId).sort()).toEqual(["x", "y"]);
    // approve x; the process dies right after x's effect, before its result is saved
    await killedAt(
      st,
      ["confirm", runId, JSON.stringify({ stepId: "x", decision: "approve" })],
      "db_commit:update.test_effects(finished_at):1",
    );
    const recovered = reportOf(await runToEnd(st, ["recover"]));
    expect(recovered.report.pending).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ stepId: "x", inDoubt: true, round: 1 }),
        expect.objectContaining({ stepId: "y", round: 0 }),
      ]),
    );
    expect(countBy(recovered.effects)).toEqual({ x: 1 });
    // the same step waits again in a new round: a new run_waiting_confirmation event, not a dropped duplicate
    expect(recovered.report.types.filter((t) => t === "run_waiting_confirmation")).toHaveLength(2);

    // a human approves y only: x's round-0 approval (still in state) must not answer round 1
    const afterY = reportOf(
      await runToEnd(st, ["confirm", runId, JSON.stringify({ stepId: "y", decision: "approve" })]),
    );
    expect(countBy(afterY.effects)).toEqual({ x: 1 });
    expect(afterY.report.status).toBe("waiting_confirmation");
    expect(afterY.report.pending).toEqual([expect.objectContaining({ stepId: "x", inDoubt: true, round: 1 })]);

    const done = reportOf(
      await runToEnd(st, [
        "confirm",
        runId,
        JSON.stringify({ stepId: "x", decision: "mark_done", output: { label: "x" } }),
      ]),
    );
    expect(done.report.status).toBe("completed");
    expect(countBy(done.effects)).toEqual({ x: 1 });
    expect(done.report.seqs).toEqual(done.report.seqs.map((_, i) => i + 1));
  }, 300_000);

  test("reconcile is per attempt: a second crash after attempt 2's effect is reconciled as applied, not retried", async () => {
    const st = storage();
    const runId = "reconcile-per-attempt";
    const plan = { steps: [{ stepId: "w", skillName: "test.db_effect_rec", arguments: { label: "w" } }] };
    // crash 1: intent of attempt 1 claimed, effect not started
    await killedAt(st, ["start", JSON.stringify(plan), runId], "db_commit:insert.tool_chain_step_intents:1");
    // recovery: reconcile(attempt 1) = not applied → attempt 2 runs its effect → crash 2
    await killedAt(st, ["recover"], "db_commit:update.test_effects(finished_at):1");
    const r = reportOf(await runToEnd(st, ["recover"]));
    expect(r.report.status).toBe("completed");
    expect(r.report.steps[0]).toMatchObject({ stepId: "w", output: { label: "w", reconciled: true } });
    // 2 when reconcile(attempt 1)'s saved "not applied" reached the checkpoint before crash 2;
    // LangGraph saves a task's result in the background, so under load it may not have: then the
    // next process asks reconcile(attempt 1) again, which now finds the effect (attempt 1 of a
    // step that completed). Either way the effect ran once and was never retried.
    expect([1, 2]).toContain(r.report.steps[0]!.attempts);
    expect(countBy(r.effects)).toEqual({ w: 1 });
  }, 300_000);

  test("a non-idempotent fallback claims an intent: after a crash it is in doubt, never run twice", async () => {
    const st = storage();
    const runId = "fallback-intent";
    const plan = {
      steps: [
        {
          stepId: "s",
          skillName: "core.fail",
          arguments: { code: "EXECUTION_FAILED" },
          retry: { maxAttempts: 1 },
          fallback: { skillName: "test.db_effect", arguments: { label: "fb" } },
        },
        { stepId: "next", skillName: "test.db_effect", dependsOn: ["s"], arguments: { label: "next" } },
      ],
    };
    // the fallback's effect committed (core.fail writes nothing)
    await killedAt(st, ["start", JSON.stringify(plan), runId], "db_commit:update.test_effects(finished_at):1");
    const r = reportOf(await runToEnd(st, ["recover"]));
    expect(countBy(r.effects)).toEqual({ fb: 1 });
    expect(r.report.status).toBe("waiting_confirmation");
    expect(r.report.pending).toEqual([expect.objectContaining({ stepId: "s", inDoubt: true })]);
    const done = reportOf(
      await runToEnd(st, [
        "confirm",
        runId,
        JSON.stringify({ stepId: "s", decision: "mark_done", output: { label: "fb" } }),
      ]),
    );
    expect(done.report.status).toBe("completed");
    expect(countBy(done.effects)).toEqual({ fb: 1, next: 1 });
  }, 300_000);
});
