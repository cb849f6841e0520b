/**
 * Redrive in one process (memory store and saver): a failed run resumes from where it failed;
 * completed steps are never executed again; refusals have stable codes.
 */
import { describe, expect, test } from "vitest";
import { z } from "zod";
import { createRuntime } from "../src/runtime/runtime.js";
import { defineSkill } from "../src/skills/contract.js";
import { ToolchainError } from "../src/kernel/errors.js";

function world() {
  const calls: Record<string, number> = {};
  const effects = new Map<string, string>();
  let providerUp = false;
  const count = (k: string) => (calls[k] = (calls[k] ?? 0) + 1);
  const write = defineSkill({
    name: "t.write",
    description: "an idempotent write keyed by the idempotency key",
    input: z.object({ label: z.string() }),
    output: z.object({ label: z.string() }),
    sideEffects: "write",
    idempotent: true,
    async execute(a, ctx) {
      count(a.label);
      effects.set(ctx.idempotencyKey, a.label);
      return { label: a.label };
    },
  });
  const provider = defineSkill({
    name: "t.provider",
    description: "fails while the provider is down",
    input: z.object({ label: z.string(), region: z.string().default("eu") }),
    sideEffects: "write",
    idempotent: true,
    async execute(a, ctx) {
      count(`${a.label}@${a.region}`);
      if (!providerUp && a.region !== "us")
        throw new ToolchainError("EXECUTION_FAILED", "provider down", { effectStarted: false });
      effects.set(ctx.idempotencyKey, a.label);
      return { label: a.label, attempt: ctx.attempt };
    },
  });
  const send = defineSkill({
    name: "t.send",
    description: "a non-idempotent send that may have happened when it fails",
    input: z.object({ label: z.string() }),
    sideEffects: "external",
    idempotent: false,
    requiresConfirmation: false,
    async execute(a) {
      count(a.label);
      if (!providerUp) throw new Error("connection reset after the request was sent");
      return { sent: a.label };
    },
    async reconcile() {
      return { applied: false as const };
    },
  });
  return { calls, effects, skills: [write, provider, send], up: () => (providerUp = true) };
}

const plan = {
  steps: [
    { stepId: "a", skillName: "t.write", arguments: { label: "a" } },
    {
      stepId: "b",
      skillName: "t.provider",
      dependsOn: ["a"],
      arguments: { label: "b" },
      retry: { maxAttempts: 1 },
    },
    { stepId: "c", skillName: "t.write", dependsOn: ["b"], arguments: { label: "c" } },
  ],
};

const code = async (p: Promise<unknown>) => {
  try {
    await p;
  } catch (e) {
    return (e as ToolchainError).code;
  }
  return "resolved";
};

describe("redrive", () => {
  test("a run failed on a transient cause resumes at the failed step; completed steps are not executed again", async () => {
    const w = world();
    const rt = createRuntime({ skills: w.skills });
    const first = await rt.run(plan).result;
    expect(first.status).toBe("failed");
    expect(first.steps.map((s) => s.status)).toEqual(["completed", "failed", "skipped"]);
    w.up();
    const h = await rt.redrive(first.runId, {}, { by: { kind: "user", id: "op" }, via: "library" });
    const view = await h.result;
    expect(view.status).toBe("completed");
    expect(w.calls).toEqual({ a: 1, "b@eu": 2, c: 1 });
    expect(view.steps.find((s) => s.stepId === "b")!.attempts).toBe(2);
    expect(view.steps.find((s) => s.stepId === "b")!.output).toEqual({ label: "b", attempt: 2 });
    expect([...w.effects.keys()].sort()).toEqual([`${first.runId}:a`, `${first.runId}:b`, `${first.runId}:c`]);
    const events = await rt.events(first.runId);
    const redriven = events.filter((e) => e.type === "run_redriven");
    expect(redriven).toHaveLength(1);
    expect(redriven[0]!.data).toMatchObject({ n: 1, by: { id: "op" }, steps: ["b", "c"], overrides: {} });
    expect(events.filter((e) => e.type === "run_failed")).toHaveLength(1);
    expect(events.filter((e) => e.type === "run_completed")).toHaveLength(1);
    expect(events.filter((e) => e.type === "step_started" && e.stepId === "a")).toHaveLength(1);
    expect(view.redrives).toEqual([expect.objectContaining({ n: 1, steps: ["b", "c"] })]);
    // completed: refused
    expect(await code(rt.redrive(first.runId))).toBe("RUN_NOT_REDRIVABLE");
  });

  test("overrides for a failed step are validated against the skill and recorded", async () => {
    const w = world();
    const rt = createRuntime({ skills: w.skills });
    const first = await rt.run(plan).result;
    expect(await code(rt.redrive(first.runId, { overrides: { b: { region: 7 } } }))).toBe("INVALID_REDRIVE");
    expect(await code(rt.redrive(first.runId, { overrides: { a: { label: "x" } } }))).toBe("INVALID_REDRIVE");
    expect(await code(rt.redrive(first.runId, { overrides: { zz: { label: "x" } } }))).toBe("INVALID_REDRIVE");
    const view = await (await rt.redrive(first.runId, { overrides: { b: { region: "us" } } })).result;
    expect(view.status).toBe("completed");
    expect(w.calls).toEqual({ a: 1, "b@eu": 1, "b@us": 1, c: 1 });
    const ev = (await rt.events(first.runId)).find((e) => e.type === "run_redriven")!;
    expect(ev.data.overrides).toEqual({ b: { region: { from: null, to: "us" } } });
  });

  test("a step that asks for confirmation takes no overrides: new arguments need its approver, not a redrive", async () => {
    const w = world();
    const rt = createRuntime({ skills: w.skills });
    const asking = { steps: plan.steps.map((s) => (s.stepId === "b" ? { ...s, requireConfirmation: true } : s)) };
    const h = rt.run(asking);
    await h.result; // waits for b's confirmation
    const first = await (await rt.confirm(h.runId, { stepId: "b", decision: "approve" })).result;
    expect(first.status).toBe("failed");
    await expect(rt.redrive(first.runId, { overrides: { b: { region: "us" } } })).rejects.toMatchObject({
      code: "INVALID_REDRIVE",
      message: expect.stringContaining('overrides.b: step "b" (t.provider) asks for confirmation'),
    });
    // refused without a trace; the approved arguments may run again as they were
    expect((await rt.events(first.runId)).some((e) => e.type === "run_redriven")).toBe(false);
    expect(w.calls).toEqual({ a: 1, "b@eu": 1 });
    const again = await (await rt.redrive(first.runId)).result;
    expect(w.calls["b@eu"]).toBe(2);
    expect(w.calls["b@us"]).toBeUndefined();
    expect(again.steps.find((s) => s.stepId === "b")!.attempts).toBe(2);
  });

  test("a redrive that fails again can be redriven again; attempts continue", async () => {
    const w = world();
    const rt = createRuntime({ skills: w.skills });
    const first = await rt.run(plan).result;
    const again = await (await rt.redrive(first.runId)).result;
    expect(again.status).toBe("failed");
    expect(again.steps.map((s) => [s.status, s.attempts])).toEqual([
      ["completed", 1],
      ["failed", 2],
      ["skipped", 0],
    ]);
    w.up();
    const done = await (await rt.redrive(first.runId)).result;
    expect(done.status).toBe("completed");
    expect(done.steps[1]!.attempts).toBe(3);
    expect(w.calls).toEqual({ a: 1, "b@eu": 3, c: 1 });
    const events = await rt.events(first.runId);
    expect(events.filter((e) => e.type === "run_failed")).toHaveLength(2);
    expect(events.filter((e) => e.type === "step_failed" && e.stepId === "b")).toHaveLength(2);
    expect(done.redrives?.map((r) => r.n)).toEqual([1, 2]);
  });

  test("a non-idempotent step that may have had its effect is reconciled first, not re-run blindly", async () => {
    const w = world();
    const rt = createRuntime({ skills: w.skills });
    const p = { steps: [{ stepId: "s", skillName: "t.send", arguments: { label: "s" }, retry: { maxAttempts: 1 } }] };
    const first = await rt.run(p).result;
    expect(first.status).toBe("failed");
    w.up();
    const view = await (await rt.redrive(first.runId)).result;
    // reconcile said "not applied": the next attempt is safe
    expect(view.status).toBe("completed");
    expect(view.steps[0]!.attempts).toBe(2);
    const ev = (await rt.events(first.runId)).find((e) => e.type === "run_redriven")!;
    expect(ev.data.inDoubt).toEqual(["s"]);
  });

  test("refused while running and for a run waiting for a confirmation", async () => {
    const w = world();
    const rt = createRuntime({ skills: w.skills });
    const h = rt.run({ steps: [{ stepId: "w", skillName: "core.wait", arguments: { ms: 300 } }] });
    await new Promise((r) => setTimeout(r, 50));
    expect(await code(rt.redrive(h.runId))).toBe("RUN_BEING_DRIVEN");
    await h.result;
    expect(await code(rt.redrive(h.runId))).toBe("RUN_NOT_REDRIVABLE");
    expect(await code(rt.redrive("nope"))).toBe("RUN_NOT_FOUND");
  });
});
