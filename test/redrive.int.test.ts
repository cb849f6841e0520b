/**
 * Redrive across real processes on the configured database (server Postgres with DATABASE_URL,
 * else embedded PGlite on disk): a run fails on an outside cause in one process, the cause is
 * fixed, another process redrives it; effects are rows in the same database, counted per step.
 */
import { afterAll, describe, expect, test } from "vitest";
import pg from "pg";
import { runToEnd, sharedStorage, spawnChild, type ChildEnv } from "./helpers/child.js";
import { serverUrl } from "./helpers/backends.js";

interface Report {
  report: {
    status: string;
    steps: { stepId: string; status: string; attempts: number; output: unknown }[];
    seqs: number[];
    types: string[];
  };
  effects: { key: string; label: string; pid: number }[];
}
const reportOf = (lines: Record<string, unknown>[]) => lines.filter((l) => "report" in l).at(-1) as unknown as Report;
const countBy = (effects: Report["effects"]) =>
  effects.reduce<Record<string, number>>((m, e) => ((m[e.label] = (m[e.label] ?? 0) + 1), m), {});
/** A child that is refused: the code it printed. */
async function refusal(st: ChildEnv, args: string[]): Promise<string | undefined> {
  const c = spawnChild(st, args);
  await c.exited;
  return (c.lines.find((l) => "error" in l) as { code?: string } | undefined)?.code;
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

/** The outside cause, switched from the test (the provider comes back). */
async function providerUp(st: ChildEnv): Promise<void> {
  const pool = new pg.Pool({ connectionString: serverUrl, max: 1 });
  await pool.query(
    `INSERT INTO "${st.schema}".test_outside (id, up) VALUES (1, true) ON CONFLICT (id) DO UPDATE SET up = true`,
  );
  await pool.end();
}

const plan = (wait: number) => ({
  steps: [
    { stepId: "a", skillName: "test.db_effect", arguments: { label: "a" } },
    { stepId: "b", skillName: "test.flaky", dependsOn: ["a"], arguments: { label: "b" }, retry: { maxAttempts: 1 } },
    { stepId: "w", skillName: "core.wait", dependsOn: ["b"], arguments: { ms: wait } },
    { stepId: "c", skillName: "test.db_effect", dependsOn: ["w"], arguments: { label: "c" } },
  ],
});

describe.runIf(serverUrl)("redrive across processes (server Postgres)", () => {
  test("a run failed on a transient cause is redriven by another process after the cause is fixed: every effect once", async () => {
    const st = storage();
    const runId = "redrive-transient";
    const failed = reportOf(await runToEnd(st, ["start", JSON.stringify(plan(10)), runId]));
    expect(failed.report.status).toBe("failed");
    expect(failed.report.steps.map((s) => s.status)).toEqual(["completed", "failed", "skipped", "skipped"]);
    expect(countBy(failed.effects)).toEqual({ a: 1 });

    await providerUp(st);
    const done = await runToEnd(st, ["redrive", runId]);
    const r = reportOf(done);
    expect(r.report.status).toBe("completed");
    expect(countBy(r.effects)).toEqual({ a: 1, b: 1, c: 1 });
    expect(r.report.steps.map((s) => [s.stepId, s.attempts])).toEqual([
      ["a", 1],
      ["b", 2],
      ["w", 1],
      ["c", 1],
    ]);
    expect(r.report.seqs).toEqual(r.report.seqs.map((_, i) => i + 1));
    expect(r.report.types.filter((t) => t === "run_redriven")).toHaveLength(1);
    expect(r.report.types.filter((t) => t === "step_started")).toHaveLength(5); // a, b (twice), w, c
    // completed now: refused
    expect(await refusal(st, ["redrive", runId])).toBe("RUN_NOT_REDRIVABLE");
  }, 120_000);

  test("refused for a running run (another process executes it)", async () => {
    const st = storage();
    const runId = "redrive-running";
    const first = spawnChild(st, [
      "start",
      JSON.stringify({ steps: [{ stepId: "w", skillName: "core.wait", arguments: { ms: 3_000 } }] }),
      runId,
    ]);
    await first.waitFor((l) => l.event === "step_started");
    expect(await refusal(st, ["redrive", runId])).toBe("RUN_NOT_REDRIVABLE");
    await first.exited;
    expect(reportOf(first.lines).report.status).toBe("completed");
  }, 120_000);

  test("SIGKILL during a redrive: another process finishes it; completed steps and effects happen once", async () => {
    const st = storage();
    const runId = "redrive-kill";
    const failed = reportOf(await runToEnd(st, ["start", JSON.stringify(plan(1_500)), runId]));
    expect(failed.report.status).toBe("failed");
    await providerUp(st);
    const redriver = spawnChild(st, ["redrive", runId]);
    await redriver.waitFor((l) => l.event === "step_started" && l.stepId === "w");
    redriver.proc.kill("SIGKILL");
    await redriver.exited;
    const r = reportOf(await runToEnd(st, ["recover"]));
    expect(r.report.status).toBe("completed");
    expect(countBy(r.effects)).toEqual({ a: 1, b: 1, c: 1 });
    expect(r.report.steps.find((s) => s.stepId === "b")!.attempts).toBe(2);
    expect(r.report.seqs).toEqual(r.report.seqs.map((_, i) => i + 1));
    expect(r.report.types.filter((t) => t === "run_redriven")).toHaveLength(1);
  }, 120_000);
});
