/**
 * A deploy while a run waits for a confirmation, as two process generations with different
 * versions of one skill against one server Postgres: the new generation resumes the run with a
 * compatible version, with a migration, or (incompatible) leaves it and, after the grace period,
 * fails it before its next step and compensates, nothing repeated.
 */
import { afterAll, describe, expect, test } from "vitest";
import pg from "pg";
import { runToEnd, sharedStorage, type ChildEnv } from "./helpers/child.js";
import { serverUrl } from "./helpers/backends.js";

interface Report {
  report: {
    status: string;
    steps: { stepId: string; status: string; attempts: number; output: unknown }[];
    pending: { stepId: string }[];
    error: { code: string; message: string; details?: unknown } | null;
    waitingFor: { skillVersion: { skill: string; pinned: { version: string }; available: { version: string } } } | null;
    types: string[];
    seqs: number[];
  };
  effects: { key: string; label: string }[];
  undos?: string[];
}
const reportOf = (lines: Record<string, unknown>[]) => lines.filter((l) => "report" in l).at(-1) as unknown as Report;
const undosOf = (lines: Record<string, unknown>[]) =>
  (lines.filter((l) => "undos" in l).at(-1) as { undos: string[] } | undefined)?.undos;
const labels = (r: Report) => r.effects.map((e) => e.label).sort();

const schemas: string[] = [];
afterAll(async () => {
  if (!serverUrl) return;
  const pool = new pg.Pool({ connectionString: serverUrl, max: 1 });
  for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
  await pool.end();
});
function storage(gen: string, extra: Record<string, string> = {}): ChildEnv {
  const s = sharedStorage();
  schemas.push(s.schema);
  return { ...s, env: { ...s.env, SKILL_GEN: gen, ...extra } };
}
const as = (st: ChildEnv, gen: string, extra: Record<string, string> = {}): ChildEnv => ({
  ...st,
  env: { ...st.env, SKILL_GEN: gen, ...extra },
});

const plan = {
  steps: [
    { stepId: "a", skillName: "test.db_effect_comp", arguments: { label: "a" } },
    { stepId: "p", skillName: "test.versioned", dependsOn: ["a"], arguments: { label: "p" } },
    { stepId: "c", skillName: "test.db_effect", dependsOn: ["p"], arguments: { label: "c" } },
  ],
};
const approve = JSON.stringify({ stepId: "p", decision: "approve" });

/** Generation 1 plans and starts the run; it waits for the confirmation of p. */
async function waitingRun(st: ChildEnv, runId: string): Promise<void> {
  const r = reportOf(await runToEnd(as(st, "v1"), ["start", JSON.stringify(plan), runId]));
  expect(r.report.status).toBe("waiting_confirmation");
  expect(r.report.pending.map((p) => p.stepId)).toEqual(["p"]);
  expect(labels(r)).toEqual(["a"]);
}

describe.runIf(serverUrl)("pinned skill versions across a deploy (server Postgres)", () => {
  test("compatible version (same schema hash, newer semver): the new generation resumes the run", async () => {
    const st = storage("v1");
    await waitingRun(st, "ver-compatible");
    const r = reportOf(await runToEnd(as(st, "v1.1"), ["confirm", "ver-compatible", approve]));
    expect(r.report.status).toBe("completed");
    expect(labels(r)).toEqual(["a", "c", "p"]);
    expect(r.report.steps.find((s) => s.stepId === "p")!.output).toEqual({ wrote: "p", gen: "v1.1" });
  }, 120_000);

  test("a version that migrates: the pending arguments are rewritten for it, then validated and run", async () => {
    const st = storage("v1");
    await waitingRun(st, "ver-migrate");
    const r = reportOf(await runToEnd(as(st, "v2m"), ["confirm", "ver-migrate", approve]));
    expect(r.report.status).toBe("completed");
    expect(labels(r)).toEqual(["a", "c", "p"]);
    expect(r.report.steps.find((s) => s.stepId === "p")!.output).toEqual({ wrote: "p", gen: "v2m" });
  }, 120_000);

  test("an incompatible version: the run is left waiting for a process that has it, then fails before its next step and compensates", async () => {
    const st = storage("v1");
    await waitingRun(st, "ver-incompatible");
    // the new generation records the decision but does not drive the run
    const left = reportOf(
      await runToEnd(as(st, "v2x", { TOOLCHAIN_VERSION_GRACE_MS: "3600000" }), [
        "confirm",
        "ver-incompatible",
        approve,
      ]),
    );
    expect(left.report.status).toBe("waiting_confirmation");
    expect(left.report.waitingFor?.skillVersion).toMatchObject({
      skill: "test.versioned",
      pinned: { version: "1.0.0" },
      available: { version: "2.0.0" },
    });
    expect(left.report.types).toContain("run_waiting_for_version");
    expect(labels(left)).toEqual(["a"]);
    // the grace period is over: a process of the new generation fails it before p starts
    const lines = await runToEnd(as(st, "v2x", { TOOLCHAIN_VERSION_GRACE_MS: "0" }), ["recover"]);
    const r = reportOf(lines);
    expect(r.report.error?.code).toBe("SKILL_VERSION_UNAVAILABLE");
    expect(r.report.error?.message).toContain('skill "test.versioned"');
    expect(r.report.error?.message).toContain("1.0.0");
    expect(r.report.error?.message).toContain("2.0.0");
    expect(r.report.status).toBe("rolled_back");
    expect(undosOf(lines)).toEqual(["a"]);
    // nothing repeated, nothing new: a ran once, p and c never
    expect(labels(r)).toEqual(["a"]);
    expect(r.report.types.filter((t) => t === "step_started")).toHaveLength(1);
    expect(r.report.seqs).toEqual(r.report.seqs.map((_, i) => i + 1));
  }, 120_000);
});
