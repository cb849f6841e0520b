/**
 * README promises about bounded re-drives ("Bounded re-drives"): a permanent error (Postgres data
 * exceptions and program limits, SQLSTATE classes 22 and 54) fails the run at once, where any
 * other drive error is re-driven up to `maxFailures`; the default schedule is 1 s, 2 s, 4 s, … at
 * most 60 s after 5 consecutive failures. On memory and on Postgres.
 */
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { defineSkill, type Skill } from "../src/skills/contract.js";
import { ErrorCode, ToolchainError } from "../src/kernel/errors.js";
import { DEFAULT_DRIVE_RETRY, driveBackoffMs } from "../src/store/run-store.js";
import type { Runtime } from "../src/runtime/runtime.js";
import { backends } from "./helpers/backends.js";

/** Its serialKey hook throws what a driver of Postgres would: an Error carrying a SQLSTATE `code` (its first `times` calls per tag). */
function sqlstateSkill(calls: Map<string, number[]>): Skill {
  return defineSkill({
    name: "t.sqlstate",
    description: "its serialKey hook throws a database error",
    input: z.object({ tag: z.string(), sqlstate: z.string(), times: z.number() }),
    sideEffects: "none",
    idempotent: true,
    serialKey: (a) => {
      const at = calls.get(a.tag) ?? [];
      calls.set(a.tag, [...at, performance.now()]);
      if (at.length < a.times) throw Object.assign(new Error(`database refused (${a.sqlstate})`), { code: a.sqlstate });
      return "k";
    },
    async execute() {
      return "ran";
    },
  });
}
/** Fails as a step while `refuse.now` is false; then its serialKey hook throws a permanent database error (22P05). */
function refusedSkill(refuse: { now: boolean }): Skill {
  return defineSkill({
    name: "t.refused",
    description: "fails, later refused by the database",
    input: z.object({}),
    sideEffects: "none",
    idempotent: true,
    serialKey: () => {
      if (refuse.now) throw Object.assign(new Error("database refused (22P05)"), { code: "22P05" });
      return "r";
    },
    async execute() {
      throw new ToolchainError(ErrorCode.EXECUTION_FAILED, "the step failed");
    },
  });
}
const plan = (tag: string, sqlstate: string, times = 99) => ({
  steps: [{ stepId: "s", skillName: "t.sqlstate", arguments: { tag, sqlstate, times } }],
});

test("the default drive-retry schedule: 1 s, doubling, at most 60 s; failed after 5 consecutive failures", () => {
  expect(DEFAULT_DRIVE_RETRY).toEqual({ maxFailures: 5, initialMs: 1_000, maxMs: 60_000 });
  expect([1, 2, 3, 4, 5, 6, 7, 8, 20].map((n) => driveBackoffMs(DEFAULT_DRIVE_RETRY, n))).toEqual([
    1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000,
  ]);
});

describe.each(backends)("drive failures on $name", (backend) => {
  // two runtimes per backend, opened once: re-drives after 10 ms (at most 3), and the default policy
  const calls = new Map<string, number[]>();
  const refuse = { now: false };
  let fast: Runtime;
  let byDefault: Runtime;
  const closers: (() => Promise<void>)[] = [];
  beforeAll(async () => {
    const a = await backend.open({
      skills: [sqlstateSkill(calls), refusedSkill(refuse)],
      driveRetry: { maxFailures: 3, initialMs: 10, maxMs: 10 },
    });
    const b = await backend.open({ skills: [sqlstateSkill(calls)] });
    closers.push(a.close, b.close);
    [fast, byDefault] = [a.runtime, b.runtime];
  }, 180_000);
  afterAll(async () => {
    for (const c of closers) await c();
  });

  test.each(["22P05", "22003", "54000", "54001"])(
    "SQLSTATE %s (class 22 / 54) is permanent: the run fails after one drive",
    async (sqlstate) => {
      const v = await fast.run(plan(`perm-${sqlstate}`, sqlstate)).result;
      expect(calls.get(`perm-${sqlstate}`)).toHaveLength(1);
      expect(v.status).toBe("failed");
      expect(v.error).toMatchObject({ code: "DRIVE_FAILED" });
      expect(v.error!.message).toBe(
        `the run could not be executed or persisted (a permanent error): database refused (${sqlstate})`,
      );
      expect(await fast.store.getRow(v.runId)).toMatchObject({ status: "failed", driveFailures: 1, leaseOwner: null });
      const failed = (await fast.events(v.runId)).filter((e) => e.type === "run_failed");
      expect(failed).toHaveLength(1);
      expect(await fast.recover()).toEqual([]);
      expect(calls.get(`perm-${sqlstate}`)).toHaveLength(1);
    },
  );

  test("a drive that fails for good after a redrive still ends the run with its own terminal event", async () => {
    // the step fails (the observer's run_failed ends the run), then the redrive's drive fails for good:
    // its run_failed was dropped as a duplicate of the first when both were keyed `run_failed::`
    refuse.now = false;
    const failed = await fast.run({ steps: [{ stepId: "s", skillName: "t.refused", retry: { maxAttempts: 1 } }] })
      .result;
    expect(failed.status).toBe("failed");
    refuse.now = true;
    const v = await (await fast.redrive(failed.runId)).result;
    expect(v.error).toMatchObject({ code: "DRIVE_FAILED" });
    const ends = (await fast.events(failed.runId)).filter((e) => e.type === "run_failed");
    expect(ends.map((e) => (e.data.error as { code: string }).code)).toEqual(["EXECUTION_FAILED", "DRIVE_FAILED"]);
  });

  test("another SQLSTATE (23505) is re-driven until maxFailures", async () => {
    const v = await fast.run(plan("other", "23505")).result;
    expect(calls.get("other")).toHaveLength(3);
    expect(v.error!.message).toBe(
      "the run could not be executed or persisted (3 consecutive failed attempts): database refused (23505)",
    );
    expect(await fast.store.getRow(v.runId)).toMatchObject({ status: "failed", driveFailures: 3 });
  });

  test("with the default policy the first re-drive waits 1 s, and a normal drive resets the count", async () => {
    const v = await byDefault.run(plan("default", "40001", 1)).result;
    expect(v.status).toBe("completed");
    const at = calls.get("default")!;
    expect(at.length).toBeGreaterThanOrEqual(2);
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(990);
    expect((await byDefault.store.getRow(v.runId))!.driveFailures).toBe(0);
  });
});
