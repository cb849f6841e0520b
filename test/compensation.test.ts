/**
 * Saga compensation: what is undone, in which order, in best_effort and strict modes.
 * Effects and undos are counted by the test skills (EffectLedger, RecordTable).
 */
import { afterEach, describe, expect, test } from "vitest";
import { z } from "zod";
import { createRuntime, defineSkill, type RunEvent, type RunView } from "../src/index.js";
import { backends } from "./helpers/backends.js";
import { createRecordsSkill, EffectLedger, effectSkill, RecordTable } from "./helpers/skills.js";
import { settle, stepOf } from "./helpers/run.js";

const step = stepOf;
const fast = { maxAttempts: 1 } as const;
type Mode = "best_effort" | "strict";

/** Invariants every rollback must satisfy, whatever completed before the failure. */
function expectSagaInvariants(ledger: EffectLedger, events: RunEvent[], view: RunView) {
  const completed = events.filter((e) => e.type === "step_completed").map((e) => e.stepId!);
  const undone = ledger.log.filter((l) => l.startsWith("undo:")).map((l) => l.slice(5));
  // exactly the completed writes are undone, each once, in reverse completion order
  const writes = completed.filter((id) => view.steps.find((s) => s.stepId === id)!.skillName === "test.effect");
  expect(undone).toEqual([...writes].reverse());
  for (const n of ledger.compensations.values()) expect(n).toBe(1);
  for (const s of view.steps) {
    if (writes.includes(s.stepId))
      expect(s).toMatchObject({ status: "rolled_back", rollback: { status: "rolled_back" } });
    else expect(s.status).not.toBe("rolled_back");
  }
}

describe("compensation matrix (fail_fast)", () => {
  const chainIds = ["w0", "w1", "w2", "w3"];
  for (const mode of ["best_effort", "strict"] as Mode[]) {
    for (let pos = 0; pos <= chainIds.length; pos++) {
      test(`${mode}: chain failing at position ${pos}`, async () => {
        const ledger = new EffectLedger();
        const rt = createRuntime({ skills: [effectSkill(ledger)] });
        const ids = [...chainIds.slice(0, pos), "boom", ...chainIds.slice(pos)];
        const steps = ids.map((id, i) =>
          id === "boom"
            ? { stepId: id, skillName: "core.fail", dependsOn: i ? [ids[i - 1]!] : [], retry: fast }
            : { stepId: id, skillName: "test.effect", dependsOn: i ? [ids[i - 1]!] : [], arguments: { label: id } },
        );
        const { events, view } = await settle(rt.run({ onFailure: "fail_fast", rollbackMode: mode, steps }));
        expect(view.status).toBe(pos === 0 ? "failed" : "rolled_back");
        expect(ledger.log).toEqual([
          ...chainIds.slice(0, pos).map((x) => `effect:${x}`),
          ...chainIds
            .slice(0, pos)
            .reverse()
            .map((x) => `undo:${x}`),
        ]);
        for (const id of chainIds.slice(pos)) expect(step(view, id).status).toBe("cancelled");
        expectSagaInvariants(ledger, events, view);
      });
    }
    for (const failing of ["root", "a", "join", "tail"]) {
      test(`${mode}: fan-out/fan-in failing at ${failing}`, async () => {
        const ledger = new EffectLedger();
        const rt = createRuntime({ skills: [effectSkill(ledger)] });
        const shape: [string, string[]][] = [
          ["root", []],
          ["a", ["root"]],
          ["b", ["root"]],
          ["c", ["root"]],
          ["join", ["a", "b", "c"]],
          ["tail", ["join"]],
        ];
        const steps = shape.map(([id, deps]) =>
          id === failing
            ? { stepId: id, skillName: "core.fail", dependsOn: deps, retry: fast }
            : {
                stepId: id,
                skillName: "test.effect",
                dependsOn: deps,
                arguments: { label: id, ms: id === "b" || id === "c" ? 5 : 0 },
              },
        );
        const { events, view } = await settle(rt.run({ onFailure: "fail_fast", rollbackMode: mode, steps }));
        // root failing leaves nothing to undo (failed); any later failure finds root completed (rolled_back)
        expect(view.status).toBe(failing === "root" ? "failed" : "rolled_back");
        expect(step(view, failing).status).toBe("failed");
        expectSagaInvariants(ledger, events, view);
        // a join is undone before the branches it depended on
        const undone = ledger.log.filter((l) => l.startsWith("undo:"));
        if (undone.includes("undo:join"))
          for (const b of ["a", "b", "c"])
            expect(undone.indexOf("undo:join")).toBeLessThan(undone.indexOf(`undo:${b}`));
        if (undone.includes("undo:root")) expect(undone.at(-1)).toBe("undo:root");
      });
    }
  }
});

describe("compensation behaviour", () => {
  test("a compensation that fails once is retried per policy and succeeds", async () => {
    const ledger = new EffectLedger();
    const rt = createRuntime({ skills: [effectSkill(ledger, { compensationFailures: 1 })] });
    const { view } = await settle(
      rt.run({
        onFailure: "fail_fast",
        steps: [
          {
            stepId: "w",
            skillName: "test.effect",
            arguments: { label: "w" },
            retry: { maxAttempts: 2, backoff: { kind: "fixed", initialMs: 1 } },
          },
          { stepId: "boom", skillName: "core.fail", dependsOn: ["w"], retry: fast },
        ],
      }),
    );
    expect(view.status).toBe("rolled_back");
    expect(ledger.log).toEqual(["effect:w", "undo:w"]);
  });

  test("best_effort goes past a compensation that always fails and reports it per step", async () => {
    const ledger = new EffectLedger();
    const broken = effectSkill(ledger, { name: "test.broken", compensationFailures: Number.POSITIVE_INFINITY });
    const rt = createRuntime({ skills: [effectSkill(ledger), broken] });
    const { events, view } = await settle(
      rt.run({
        onFailure: "fail_fast",
        steps: [
          { stepId: "w1", skillName: "test.effect", arguments: { label: "w1" } },
          {
            stepId: "bad",
            skillName: "test.broken",
            dependsOn: ["w1"],
            arguments: { label: "bad" },
            retry: { maxAttempts: 2, backoff: { kind: "fixed", initialMs: 1 } },
          },
          { stepId: "w2", skillName: "test.effect", dependsOn: ["bad"], arguments: { label: "w2" } },
          { stepId: "boom", skillName: "core.fail", dependsOn: ["w2"], retry: fast },
        ],
      }),
    );
    expect(view.status).toBe("rollback_failed");
    expect(ledger.log).toEqual(["effect:w1", "effect:bad", "effect:w2", "undo:w2", "undo:w1"]);
    expect(step(view, "bad")).toMatchObject({
      status: "rollback_failed",
      rollback: { status: "rollback_failed", error: { code: "TRANSIENT" } },
    });
    expect(step(view, "w1").rollback).toMatchObject({ status: "rolled_back" });
    expect(events.find((e) => e.type === "rollback_completed")!.data).toMatchObject({ ok: false, failures: 1 });
  });

  test("a side effect with no compensation is reported not_compensable, never counted as rolled back", async () => {
    const ledger = new EffectLedger();
    const rt = createRuntime({
      skills: [effectSkill(ledger), effectSkill(ledger, { name: "test.irreversible", compensable: false })],
    });
    const { view } = await settle(
      rt.run({
        onFailure: "fail_fast",
        steps: [
          { stepId: "email", skillName: "test.irreversible", arguments: { label: "email" } },
          { stepId: "w", skillName: "test.effect", dependsOn: ["email"], arguments: { label: "w" } },
          { stepId: "boom", skillName: "core.fail", dependsOn: ["w"], retry: fast },
        ],
      }),
    );
    expect(view.status).toBe("rollback_failed");
    expect(step(view, "email")).toMatchObject({
      status: "completed",
      rollback: { status: "not_compensable", error: { code: "NOT_COMPENSABLE" } },
    });
    expect(step(view, "w").status).toBe("rolled_back");
  });

  test("delete_created_records deletes exactly the records the step created", async () => {
    const table = new RecordTable();
    table.insert("existing before the run", "someone");
    const rt = createRuntime({ skills: [createRecordsSkill(table)] });
    const { view } = await settle(
      rt.run({
        onFailure: "fail_fast",
        steps: [
          {
            stepId: "create",
            skillName: "test.create_records",
            arguments: { titles: ["design", "build"] },
            rollback: { kind: "delete_created_records" },
          },
          { stepId: "boom", skillName: "core.fail", dependsOn: ["create"], retry: fast },
        ],
      }),
    );
    expect(view.status).toBe("rolled_back");
    expect([...table.rows.values()].map((r) => r.title)).toEqual(["existing before the run"]);
  });

  test("a rollback skill receives arguments resolved from the step's own input and output", async () => {
    const calls: unknown[] = [];
    const undo = defineSkill({
      name: "test.undo",
      description: "records what it was asked to undo",
      input: z.object({ ids: z.array(z.string()), reason: z.string() }),
      sideEffects: "write",
      idempotent: true,
      async execute(a) {
        calls.push(a);
        return null;
      },
    });
    const table = new RecordTable();
    const rt = createRuntime({ skills: [createRecordsSkill(table), undo] });
    const { view } = await settle(
      rt.run({
        onFailure: "fail_fast",
        steps: [
          {
            stepId: "create",
            skillName: "test.create_records",
            arguments: { titles: ["x"] },
            rollback: {
              kind: "skill",
              skillName: "test.undo",
              arguments: { ids: { $ref: "self.output.ids" }, reason: { $ref: "self.input.titles.0" } },
            },
          },
          { stepId: "boom", skillName: "core.fail", dependsOn: ["create"], retry: fast },
        ],
      }),
    );
    expect(view.status).toBe("rolled_back");
    expect(calls).toEqual([{ ids: ["rec_1"], reason: "x" }]);
  });

  test("strict mode refuses a plan with an uncompensable side effect before anything runs", () => {
    const ledger = new EffectLedger();
    const rt = createRuntime({ skills: [effectSkill(ledger, { name: "test.irreversible", compensable: false })] });
    expect(() =>
      rt.run({
        rollbackMode: "strict",
        steps: [{ stepId: "email", skillName: "test.irreversible", arguments: { label: "e" } }],
      }),
    ).toThrow(expect.objectContaining({ code: "NOT_COMPENSABLE" }));
    expect(ledger.total()).toBe(0);
  });
});

describe.each(backends)("strict rollback waits for an operator on $name", (backend) => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
  });

  async function blockedRun(failures: number) {
    const ledger = new EffectLedger();
    const broken = effectSkill(ledger, { name: "test.broken", compensationFailures: failures });
    const o = await backend.open({ skills: [effectSkill(ledger), broken] });
    closers.push(o.close);
    const { view } = await settle(
      o.runtime.run({
        onFailure: "fail_fast",
        rollbackMode: "strict",
        steps: [
          { stepId: "w1", skillName: "test.effect", arguments: { label: "w1" } },
          {
            stepId: "bad",
            skillName: "test.broken",
            dependsOn: ["w1"],
            arguments: { label: "bad" },
            retry: { maxAttempts: 2, backoff: { kind: "fixed", initialMs: 1 } },
          },
          { stepId: "w2", skillName: "test.effect", dependsOn: ["bad"], arguments: { label: "w2" } },
          { stepId: "boom", skillName: "core.fail", dependsOn: ["w2"], retry: fast },
        ],
      }),
    );
    return { rt: o.runtime, ledger, view };
  }

  test("the first failed compensation stops the rollback; the rest stay untouched and pending", async () => {
    const { view, ledger } = await blockedRun(Number.POSITIVE_INFINITY);
    expect(view.status).toBe("rollback_failed");
    expect(ledger.log).toEqual(["effect:w1", "effect:bad", "effect:w2", "undo:w2"]);
    expect(step(view, "w1")).toMatchObject({ status: "completed", rollback: { status: "pending" } });
    expect(step(view, "bad")).toMatchObject({ status: "rollback_failed", rollback: { status: "rollback_failed" } });
    expect(view.pendingConfirmations).toEqual([
      expect.objectContaining({ stepId: "bad", kind: "compensation", round: 102 }),
    ]);
  });

  test("operator: skip leaves that step undone and continues; the run ends rollback_failed", async () => {
    const { rt, view, ledger } = await blockedRun(Number.POSITIVE_INFINITY);
    await expect(rt.confirm(view.runId, { stepId: "bad", decision: "mark_done" })).rejects.toMatchObject({
      code: "INVALID_DECISION",
    });
    const done = await settle(
      await rt.confirm(
        view.runId,
        { stepId: "bad", decision: "skip", comment: "done by hand" },
        { by: { kind: "user", id: "ops", name: "Ops" }, via: "cli" },
      ),
    );
    expect(done.view.status).toBe("rollback_failed");
    // the compensation decision names who took it
    const decided = (await rt.events(view.runId)).filter((e) => e.type === "step_confirmed" && e.stepId === "bad");
    expect(decided.map((e) => e.data)).toEqual([
      {
        decision: "skip",
        kind: "compensation",
        comment: "done by hand",
        by: { kind: "user", id: "ops", name: "Ops" },
        via: "cli",
      },
    ]);
    expect(done.view.pendingConfirmations).toEqual([]);
    expect(ledger.log).toEqual(["effect:w1", "effect:bad", "effect:w2", "undo:w2", "undo:w1"]);
    expect(step(done.view, "bad").rollback!.error!.message).toContain("skipped by operator");
  });

  test("operator: stop leaves the remaining steps untouched", async () => {
    const { rt, view, ledger } = await blockedRun(Number.POSITIVE_INFINITY);
    const done = await settle(await rt.confirm(view.runId, { stepId: "bad", decision: "reject" }));
    expect(done.view.status).toBe("rollback_failed");
    expect(ledger.log).toEqual(["effect:w1", "effect:bad", "effect:w2", "undo:w2"]);
    expect(step(done.view, "w1").rollback).toMatchObject({ status: "pending" });
  });

  test("operator: retry after the cause is fixed completes the rollback; nothing is undone twice", async () => {
    const { rt, view, ledger } = await blockedRun(2); // fails both attempts of the first round only
    const done = await settle(await rt.confirm(view.runId, { stepId: "bad", decision: "approve" }));
    expect(done.view.status).toBe("rolled_back");
    expect(ledger.log).toEqual(["effect:w1", "effect:bad", "effect:w2", "undo:w2", "undo:bad", "undo:w1"]);
    for (const n of ledger.compensations.values()) expect(n).toBe(1);
  });

  test("the wait for the operator and the resumed rollback each end the run with their own terminal event", async () => {
    const { rt, view } = await blockedRun(2);
    const done = await settle(await rt.confirm(view.runId, { stepId: "bad", decision: "approve" }));
    const ends = (await rt.events(view.runId)).filter((e) => e.type === "run_failed" || e.type === "run_completed");
    // the wait's end is written back when its drive stops at the operator's interrupt; the observer's
    // after the retry was dropped as a duplicate of it when both were keyed `run_failed::`
    expect(ends.map((e) => [e.key, e.data.status])).toEqual([
      ["run_failed::rollback@102", "rollback_failed"],
      ["run_failed::", "rolled_back"],
    ]);
    expect(done.view.status).toBe("rolled_back");
  });
});
