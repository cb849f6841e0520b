/**
 * README promise (Execution semantics, Scheduling): "Limits are held while an attempt executes
 * (not during retry backoff, previews, fallbacks or compensations)". Each case parks one run
 * exactly there (a 10-minute backoff, a preview or a compensation blocked on a gate, a fallback
 * skill blocked on a gate) while it would hold a resource of limit 1, and shows that another run's
 * step needing that resource starts and completes meanwhile. Were the limit held, that run would
 * wait and the test fail with "other run completed not reached". On memory and on Postgres.
 */
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { defineSkill, type Skill } from "../src/skills/contract.js";
import { ErrorCode, ToolchainError } from "../src/kernel/errors.js";
import type { Runtime } from "../src/runtime/runtime.js";
import { backends } from "./helpers/backends.js";
import { EffectLedger, Gates, gateSkill } from "./helpers/skills.js";
import { waitFor } from "./helpers/wait.js";

const closers: (() => Promise<void>)[] = [];

/** A write that needs the resource `shared` (limit 1); where it blocks is chosen per call. */
function limitedSkill(gates: Gates, ledger: EffectLedger): Skill {
  return defineSkill({
    name: "t.limited",
    description: "a write on a provider that allows one call at a time",
    input: z.object({
      label: z.string(),
      fail: z.enum(["once", "always"]).optional(),
      previewGate: z.string().optional(),
      undoGate: z.string().optional(),
    }),
    sideEffects: "write",
    idempotent: true,
    resource: { name: "shared", limit: 1 },
    async preview(a) {
      if (a.previewGate) await gates.wait(a.previewGate);
      return { will: a.label };
    },
    async execute(a, ctx) {
      if (a.fail === "always" || (a.fail === "once" && ctx.attempt === 1))
        throw new ToolchainError(ErrorCode.RATE_LIMITED, "provider busy", { effectStarted: false });
      ledger.effects.set(ctx.idempotencyKey, (ledger.effects.get(ctx.idempotencyKey) ?? 0) + 1);
      return { label: a.label };
    },
    async compensate(c) {
      const a = c.input as { undoGate?: string };
      if (a.undoGate) await gates.wait(a.undoGate);
      ledger.compensations.set(c.effectKey, (ledger.compensations.get(c.effectKey) ?? 0) + 1);
    },
  });
}

describe.each(backends)("limits are not held outside an attempt, on $name", (backend) => {
  // one runtime per backend (opening one costs seconds under load); gates are named per test
  const gates = new Gates();
  const ledger = new EffectLedger();
  let rt: Runtime;
  beforeAll(async () => {
    const o = await backend.open({ skills: [limitedSkill(gates, ledger), gateSkill(gates, new Map())] });
    rt = o.runtime;
    closers.push(o.close);
  }, 180_000);
  afterAll(async () => {
    for (const c of closers.splice(0)) await c();
  });
  const open = async () => ({ rt, gates, ledger });
  /** Another run needing the same resource gets it now (it would wait forever behind a held limit). */
  async function otherRunCompletes(rt: Runtime, ledger: EffectLedger) {
    const h = rt.run({ steps: [{ stepId: "o", skillName: "t.limited", arguments: { label: "other" } }] });
    const v = await Promise.race([
      h.result,
      waitFor(() => false, { timeoutMs: 8_000, what: "other run completed" }).then(() => undefined),
    ]);
    expect(v?.status).toBe("completed");
    expect(ledger.effects.get(`${h.runId}:o`)).toBe(1);
    const waited = (await rt.events(h.runId)).filter((e) => e.type === "step_waiting_for_limit");
    expect(waited).toEqual([]);
  }
  const stepStatus = async (rt: Runtime, runId: string, stepId: string) =>
    (await rt.getRun(runId)).steps.find((s) => s.stepId === stepId)?.status;

  test("during retry backoff", async () => {
    const { rt, ledger } = await open();
    const h = rt.run({
      steps: [
        {
          stepId: "a",
          skillName: "t.limited",
          arguments: { label: "a", fail: "once" },
          retry: { maxAttempts: 2, backoff: { kind: "fixed", initialMs: 600_000 }, retryOn: ["RATE_LIMITED"] },
        },
      ],
    });
    await waitFor(async () => (await stepStatus(rt, h.runId, "a")) === "retrying", { what: "a in backoff" });
    await otherRunCompletes(rt, ledger);
    // the backoff is still running: the first run's attempt 2 has not happened
    expect(await stepStatus(rt, h.runId, "a")).toBe("retrying");
    expect(ledger.effects.get(`${h.runId}:a`)).toBeUndefined();
    expect((await (await rt.cancel(h.runId, "test over")).result).status).toBe("cancelled");
  });

  test("while a preview is computed (and while the step then waits for its confirmation)", async () => {
    const { rt, gates, ledger } = await open();
    const h = rt.run({
      steps: [
        {
          stepId: "a",
          skillName: "t.limited",
          requireConfirmation: true,
          arguments: { label: "a", previewGate: "pv" },
        },
      ],
    });
    await gates.untilEntered("pv");
    await otherRunCompletes(rt, ledger);
    gates.open("pv");
    const waiting = await h.result;
    expect(waiting.status).toBe("waiting_confirmation");
    expect(waiting.pendingConfirmations[0]).toMatchObject({ stepId: "a", preview: { will: "a" } });
    await otherRunCompletes(rt, ledger);
    const done = await (await rt.confirm(h.runId, { stepId: "a", decision: "approve" })).result;
    expect(done.status).toBe("completed");
    expect(ledger.effects.get(`${h.runId}:a`)).toBe(1);
  });

  test("while the failed step's fallback skill runs", async () => {
    const { rt, gates, ledger } = await open();
    const h = rt.run({
      steps: [
        {
          stepId: "a",
          skillName: "t.limited",
          arguments: { label: "a", fail: "always" },
          retry: { maxAttempts: 1 },
          fallback: { skillName: "test.gate", arguments: { gate: "fb", value: "from fallback" } },
        },
      ],
    });
    await gates.untilEntered("fb");
    await otherRunCompletes(rt, ledger);
    gates.open("fb");
    const v = await h.result;
    expect(v.status).toBe("completed");
    expect(v.steps[0]).toMatchObject({ status: "completed", usedFallback: true, output: "from fallback" });
  });

  test("while the step is compensated", async () => {
    const { rt, gates, ledger } = await open();
    const h = rt.run({
      onFailure: "fail_fast",
      steps: [
        { stepId: "a", skillName: "t.limited", arguments: { label: "a", undoGate: "undo" } },
        { stepId: "boom", skillName: "core.fail", dependsOn: ["a"], retry: { maxAttempts: 1 } },
      ],
    });
    await gates.untilEntered("undo");
    await otherRunCompletes(rt, ledger);
    gates.open("undo");
    const v = await h.result;
    expect(v.steps.find((s) => s.stepId === "a")!.status).toBe("rolled_back");
    expect(ledger.compensations.get(`${h.runId}:a`)).toBe(1);
  });
});
