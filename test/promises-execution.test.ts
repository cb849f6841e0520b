/**
 * README promises about execution that had no test: retries and backoff, abandoning a skill that
 * ignores its signal, confirmation overrides, `continue` with a failed reference, priority from
 * observed durations, compensation details, deadlines around human waits, in-doubt decisions.
 * Library level (createRuntime on MemorySaver): where a user of the library meets them.
 */
import { fc, test as propTest } from "@fast-check/vitest";
import { z } from "zod";
import { describe, expect, test } from "vitest";
import { createRuntime, type RunEvent } from "../src/index.js";
import { ErrorCode, ToolchainError } from "../src/kernel/errors.js";
import { backoffDelay, compileRetry, decideRetry, DEFAULT_RETRY } from "../src/plan/retry-policy.js";
import { MAX_BACKOFF_MS } from "../src/plan/schema.js";
import { defineSkill, type Skill } from "../src/skills/contract.js";
import type { IntentLog } from "../src/store/intent-log.js";
import { approvalSkill, EffectLedger, effectSkill } from "./helpers/skills.js";
import { settle, stepOf } from "./helpers/run.js";
import { waitFor } from "./helpers/wait.js";

const noRetry = { maxAttempts: 1 } as const;

/** Fails with `code` (and `retryAfterMs`) until `untilAttempt`, recording when each attempt started. */
function flakySkill(starts: number[]): Skill {
  return defineSkill({
    name: "test.flaky",
    description: "fails until an attempt",
    input: z.object({
      untilAttempt: z.number(),
      code: z.string().default("TRANSIENT"),
      retryAfterMs: z.number().optional(),
    }),
    sideEffects: "none",
    idempotent: true,
    async execute(a, ctx) {
      starts.push(performance.now());
      if (ctx.attempt < a.untilAttempt)
        throw new ToolchainError(
          a.code as ErrorCode,
          `attempt ${ctx.attempt} failed`,
          a.retryAfterMs !== undefined ? { retryAfterMs: a.retryAfterMs } : {},
        );
      return ctx.attempt;
    },
  });
}

const retryDelays = (events: RunEvent[], id: string) =>
  events
    .filter((e) => e.type === "step_retrying" && e.stepId === id)
    .map((e) => (e.data as { delayMs: number }).delayMs);

describe("retries", () => {
  test("the default policy is the documented one", () => {
    expect(DEFAULT_RETRY).toEqual({
      maxAttempts: 2,
      backoff: { kind: "exponential", initialMs: 200, maxMs: 5_000, jitter: true },
    });
    expect([...compileRetry(undefined).retryOn].sort()).toEqual([
      "EXECUTION_FAILED",
      "RATE_LIMITED",
      "TIMEOUT",
      "TRANSIENT",
    ]);
  });

  propTest.prop([
    fc.integer({ min: 0, max: 10_000 }),
    fc.option(fc.integer({ min: 0, max: 20_000 }), { nil: undefined }),
    fc.integer({ min: 1, max: 10 }),
    fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
  ])(
    "backoff: fixed and exponential (capped by maxMs, else at 1 h), jitter within [delay/2, delay]",
    (initialMs, maxMs, attempt, r) => {
      const cap = maxMs ?? MAX_BACKOFF_MS;
      expect(backoffDelay({ kind: "fixed", initialMs, maxMs }, attempt)).toBe(Math.min(initialMs, cap));
      const exp = Math.min(initialMs * 2 ** (attempt - 1), cap);
      expect(backoffDelay({ kind: "exponential", initialMs, maxMs }, attempt)).toBe(exp);
      const j = backoffDelay({ kind: "exponential", initialMs, maxMs, jitter: true }, attempt, () => r);
      expect(j).toBeGreaterThanOrEqual(Math.floor(exp / 2));
      expect(j).toBeLessThanOrEqual(Math.ceil(exp));
    },
  );

  test("retryAfterMs of a RATE_LIMITED error raises the delay, never lowers it", () => {
    const p = compileRetry({ maxAttempts: 3, backoff: { kind: "fixed", initialMs: 100 } });
    const skill = { sideEffects: "none" as const, idempotent: true };
    expect(decideRetry(p, skill, { code: ErrorCode.RATE_LIMITED, message: "", retryAfterMs: 2_500 }, 1)).toEqual({
      retry: true,
      delayMs: 2_500,
    });
    expect(decideRetry(p, skill, { code: ErrorCode.RATE_LIMITED, message: "", retryAfterMs: 10 }, 1)).toEqual({
      retry: true,
      delayMs: 100,
    });
  });

  test("in a run: each backoff kind, maxMs, the default policy, and retryAfterMs delaying the next attempt", async () => {
    const starts: Record<string, number[]> = {};
    const rt = createRuntime({ skills: [flakySkill((starts.x ??= []))], env: { random: () => 0 } });
    const { events, view } = await settle(
      rt.run({
        maxConcurrency: 1,
        steps: [
          {
            stepId: "exp",
            skillName: "test.flaky",
            arguments: { untilAttempt: 4 },
            retry: { maxAttempts: 4, backoff: { kind: "exponential", initialMs: 10, maxMs: 25 } },
          },
          {
            stepId: "fixed",
            skillName: "test.flaky",
            dependsOn: ["exp"],
            arguments: { untilAttempt: 3 },
            retry: { maxAttempts: 3, backoff: { kind: "fixed", initialMs: 7 } },
          },
          // default policy: 2 attempts, exponential 200 ms with jitter; random() = 0 gives the lower bound
          { stepId: "dflt", skillName: "test.flaky", dependsOn: ["fixed"], arguments: { untilAttempt: 2 } },
          {
            stepId: "after",
            skillName: "test.flaky",
            dependsOn: ["dflt"],
            arguments: { untilAttempt: 2, code: "RATE_LIMITED", retryAfterMs: 150 },
            retry: { maxAttempts: 2, backoff: { kind: "fixed", initialMs: 1 } },
          },
          { stepId: "never", skillName: "test.flaky", dependsOn: ["after"], arguments: { untilAttempt: 9 } },
        ],
      }),
    );
    expect(retryDelays(events, "exp")).toEqual([10, 20, 25]);
    expect(retryDelays(events, "fixed")).toEqual([7, 7]);
    expect(retryDelays(events, "dflt")).toEqual([100]);
    expect(retryDelays(events, "after")).toEqual([150]);
    // the provider's retryAfterMs is honoured: attempt 2 of "after" started at least 150 ms after attempt 1
    const s = starts.x!;
    const afterStarts = s.slice(4 + 3 + 2, 4 + 3 + 2 + 2);
    expect(afterStarts[1]! - afterStarts[0]!).toBeGreaterThanOrEqual(149);
    // the default policy gives up after 2 attempts
    expect(stepOf(view, "never")).toMatchObject({ status: "failed", attempts: 2, error: { code: "TRANSIENT" } });
    expect(view.steps.slice(0, 4).map((x) => [x.stepId, x.status, x.attempts])).toEqual([
      ["exp", "completed", 4],
      ["fixed", "completed", 3],
      ["dflt", "completed", 2],
      ["after", "completed", 2],
    ]);
  });

  test("a skill that ignores its abort signal is abandoned at its timeout, not awaited", async () => {
    let finished = false;
    let release!: () => void;
    const stubborn = defineSkill({
      name: "test.stubborn",
      description: "ignores its signal",
      input: z.object({}),
      sideEffects: "none",
      idempotent: true,
      async execute() {
        await new Promise<void>((r) => (release = r));
        finished = true;
        return "late";
      },
    });
    const rt = createRuntime({ skills: [stubborn] });
    const { view } = await settle(
      rt.run({
        steps: [
          { stepId: "s", skillName: "test.stubborn", arguments: {}, timeoutMs: 50, retry: noRetry },
          { stepId: "next", skillName: "core.pass", dependsOn: ["s"], arguments: { value: 1 } },
        ],
      }),
    );
    expect(finished).toBe(false); // the run ended while the skill still hangs
    expect(stepOf(view, "s")).toMatchObject({
      status: "failed",
      error: { code: "TIMEOUT", message: "step timed out after 50 ms" },
    });
    expect(stepOf(view, "next").status).toBe("skipped");
    release();
  });
});

describe("confirmation overrides", () => {
  test("the plan step's requireConfirmation overrides the skill's, both ways", async () => {
    const ledger = new EffectLedger();
    const rt = createRuntime({ skills: [approvalSkill(ledger)] });
    const { view } = await settle(
      rt.run({
        steps: [
          { stepId: "pub", skillName: "test.publish", arguments: { title: "no-ask" }, requireConfirmation: false },
          { stepId: "ask", skillName: "core.pass", arguments: { value: 1 }, requireConfirmation: true },
        ],
      }),
    );
    expect(view.status).toBe("waiting_confirmation");
    expect(stepOf(view, "pub").status).toBe("completed");
    expect(ledger.log).toEqual(["publish:no-ask"]);
    expect(view.pendingConfirmations.map((p) => p.stepId)).toEqual(["ask"]);
  });

  test("requiresConfirmation(args) as a function decides per call", async () => {
    const paid: number[] = [];
    const pay = defineSkill({
      name: "test.pay",
      description: "pays; large amounts need approval",
      input: z.object({ amount: z.number() }),
      sideEffects: "external",
      idempotent: true,
      requiresConfirmation: (a: { amount: number }) => a.amount > 100,
      async execute(a) {
        paid.push(a.amount);
        return a.amount;
      },
    });
    const rt = createRuntime({ skills: [pay] });
    const { view } = await settle(
      rt.run({
        steps: [
          { stepId: "small", skillName: "test.pay", arguments: { amount: 5 } },
          { stepId: "big", skillName: "test.pay", arguments: { amount: 500 } },
        ],
      }),
    );
    expect(view.status).toBe("waiting_confirmation");
    expect(paid).toEqual([5]);
    expect(view.pendingConfirmations.map((p) => p.stepId)).toEqual(["big"]);
    const done = await settle(await rt.confirm(view.runId, { stepId: "big", decision: "approve" }));
    expect(done.view.status).toBe("completed");
    expect(paid).toEqual([5, 500]);
  });
});

describe("continue", () => {
  test("a reference to a failed step's output fails the dependent with INVALID_REFERENCE; other dependents run", async () => {
    const rt = createRuntime();
    const { view } = await settle(
      rt.run({
        onFailure: "continue",
        steps: [
          { stepId: "a", skillName: "core.fail", retry: noRetry },
          { stepId: "uses", skillName: "core.pass", dependsOn: ["a"], arguments: { value: { $ref: "steps.a.x" } } },
          { stepId: "ignores", skillName: "core.pass", dependsOn: ["a"], arguments: { value: 2 } },
        ],
      }),
    );
    expect(stepOf(view, "a").status).toBe("failed");
    expect(stepOf(view, "uses")).toMatchObject({ status: "failed", error: { code: "INVALID_REFERENCE" } });
    expect(stepOf(view, "uses").attempts).toBe(0); // never executed
    expect(stepOf(view, "ignores")).toMatchObject({ status: "completed", output: 2 });
  });
});

describe("priority", () => {
  test("when limits hold steps back, the skill with the longer observed mean duration starts first", async () => {
    const order: string[] = [];
    const mk = (name: string) =>
      defineSkill({
        name,
        description: name,
        input: z.object({}),
        sideEffects: "none",
        idempotent: true,
        execute: async () => void order.push(name),
      });
    const plan = {
      maxConcurrency: 1,
      steps: [
        { stepId: "q", skillName: "test.quick", arguments: {} },
        { stepId: "s", skillName: "test.slow", arguments: {} },
      ],
    };
    // without observations: declaration order
    const cold = createRuntime({ skills: [mk("test.quick"), mk("test.slow")] });
    await settle(cold.run(plan));
    expect(order.splice(0)).toEqual(["test.quick", "test.slow"]);
    // with observed means (no declared estimate): the slower skill first
    const warm = createRuntime({ skills: [mk("test.quick"), mk("test.slow")] });
    warm.registry.observeDuration("test.quick", 1);
    warm.registry.observeDuration("test.slow", 500);
    await settle(warm.run(plan));
    expect(order).toEqual(["test.slow", "test.quick"]);
  });
});

describe("compensation details", () => {
  test("rollback kind none: a side effect declared not undoable is not_compensable; side-effect-free steps are not_needed", async () => {
    const ledger = new EffectLedger();
    const rt = createRuntime({ skills: [effectSkill(ledger)] });
    const { view } = await settle(
      rt.run({
        onFailure: "fail_fast",
        steps: [
          { stepId: "w", skillName: "test.effect", arguments: { label: "w" }, rollback: { kind: "none" } },
          { stepId: "p", skillName: "core.pass", arguments: { value: 1 } },
          { stepId: "boom", skillName: "core.fail", dependsOn: ["w", "p"], retry: noRetry },
        ],
      }),
    );
    expect(view.status).toBe("rollback_failed");
    expect(stepOf(view, "w").rollback).toMatchObject({ status: "not_compensable" });
    expect(stepOf(view, "p").rollback).toMatchObject({ status: "not_needed" });
    expect(ledger.log).toEqual(["effect:w"]); // the skill's own compensate was not used
  });

  test("strict rollback runs compensations one at a time; a blocked one emits rollback_waiting_decision", async () => {
    let running = 0;
    let maxRunning = 0;
    const slowUndo = defineSkill({
      name: "test.slow_undo",
      description: "a write whose compensation takes a while",
      input: z.object({ label: z.string(), failUndo: z.boolean().default(false) }),
      sideEffects: "write",
      idempotent: true,
      execute: async (a) => a.label,
      async compensate(c: { input: unknown }) {
        running++;
        maxRunning = Math.max(maxRunning, running);
        await new Promise((r) => setTimeout(r, 20));
        running--;
        if ((c.input as { failUndo: boolean }).failUndo)
          throw new ToolchainError(ErrorCode.EXECUTION_FAILED, "undo refused");
      },
    });
    const rt = createRuntime({ skills: [slowUndo] });
    const steps = [
      { stepId: "first", skillName: "test.slow_undo", arguments: { label: "first", failUndo: true }, retry: noRetry },
      ...["a", "b", "c"].map((id) => ({
        stepId: id,
        skillName: "test.slow_undo",
        dependsOn: ["first"],
        arguments: { label: id },
      })),
      { stepId: "boom", skillName: "core.fail", dependsOn: ["a", "b", "c"], retry: noRetry },
    ];
    const { events, view } = await settle(rt.run({ onFailure: "fail_fast", rollbackMode: "strict", steps }));
    expect(maxRunning).toBe(1);
    expect(view.status).toBe("rollback_failed");
    expect(["a", "b", "c"].map((id) => stepOf(view, id).status)).toEqual(["rolled_back", "rolled_back", "rolled_back"]);
    const waiting = events.filter((e) => e.type === "rollback_waiting_decision");
    expect(waiting).toHaveLength(1);
    expect(waiting[0]).toMatchObject({
      stepId: "first",
      data: { error: { code: "EXECUTION_FAILED", message: "undo refused" }, skillName: "test.slow_undo" },
    });
    expect(view.pendingConfirmations).toEqual([expect.objectContaining({ stepId: "first", kind: "compensation" })]);
  });

  test("a rejection under fail_fast halts the run and compensates what completed", async () => {
    const ledger = new EffectLedger();
    const rt = createRuntime({ skills: [effectSkill(ledger), approvalSkill(ledger)] });
    const { view } = await settle(
      rt.run({
        onFailure: "fail_fast",
        steps: [
          { stepId: "w", skillName: "test.effect", arguments: { label: "w" } },
          { stepId: "pub", skillName: "test.publish", dependsOn: ["w"], arguments: { title: "t" } },
        ],
      }),
    );
    expect(view.status).toBe("waiting_confirmation");
    const done = await settle(await rt.confirm(view.runId, { stepId: "pub", decision: "reject", comment: "no" }));
    expect(done.view.status).toBe("rolled_back");
    expect(stepOf(done.view, "pub")).toMatchObject({
      status: "failed",
      error: { code: "REJECTED", message: "rejected: no" },
    });
    expect(stepOf(done.view, "w").status).toBe("rolled_back");
    expect(ledger.log).toEqual(["effect:w", "undo:w"]);
  });
});

describe("deadlines", () => {
  test("deadlineMs does not count time suspended waiting for a human", async () => {
    const ledger = new EffectLedger();
    const rt = createRuntime({ skills: [approvalSkill(ledger)] });
    const { view } = await settle(
      rt.run({
        deadlineMs: 300,
        steps: [
          { stepId: "pub", skillName: "test.publish", arguments: { title: "late" } },
          { stepId: "after", skillName: "core.wait", dependsOn: ["pub"], arguments: { ms: 20, value: "ok" } },
        ],
      }),
    );
    expect(view.status).toBe("waiting_confirmation");
    const t = Date.now();
    await waitFor(() => Date.now() > t + 500, { what: "the human taking longer than the deadline" });
    const done = await settle(await rt.confirm(view.runId, { stepId: "pub", decision: "approve" }));
    expect(done.view.status).toBe("completed");
    expect(stepOf(done.view, "after").output).toBe("ok");
  });

  test("a deadline halts the run and compensates a completed side effect", async () => {
    const ledger = new EffectLedger();
    const rt = createRuntime({ skills: [effectSkill(ledger)] });
    const { view } = await settle(
      rt.run({
        deadlineMs: 150,
        steps: [
          { stepId: "w", skillName: "test.effect", arguments: { label: "w" } },
          { stepId: "long", skillName: "core.wait", dependsOn: ["w"], arguments: { ms: 10_000 } },
        ],
      }),
    );
    expect(view.error).toMatchObject({ code: "DEADLINE_EXCEEDED", message: "plan deadline of 150 ms exceeded" });
    expect(view.status).toBe("rolled_back");
    expect(stepOf(view, "long").status).toBe("cancelled");
    expect(stepOf(view, "w").status).toBe("rolled_back");
    expect(ledger.log).toEqual(["effect:w", "undo:w"]);
  });
});

describe("in-doubt attempts", () => {
  /** Intents as if a dead process had claimed attempt 1 of every step: attempt 1 is in doubt. */
  const deadProcessClaimedAttempt1 = (): IntentLog => {
    const seen = new Set<string>();
    return {
      async claimIntent(runId, stepId, attempt) {
        const k = `${runId}/${stepId}/${attempt}`;
        if (attempt === 1 || seen.has(k)) return false;
        seen.add(k);
        return true;
      },
      async hasIntent(runId, stepId, attempt) {
        return attempt === 1 || seen.has(`${runId}/${stepId}/${attempt}`);
      },
    };
  };

  test("approve retries the step (the effect happens once, as attempt 2); reject fails it with REJECTED", async () => {
    const ledger = new EffectLedger();
    const rt = createRuntime({ skills: [effectSkill(ledger)], env: { intents: deadProcessClaimedAttempt1() } });
    const plan = { steps: [{ stepId: "w", skillName: "test.effect", arguments: { label: "w" } }] };
    const first = await settle(rt.run(plan));
    expect(first.view.status).toBe("waiting_confirmation");
    expect(first.view.pendingConfirmations).toEqual([expect.objectContaining({ stepId: "w", kind: "in_doubt" })]);
    expect(ledger.total()).toBe(0);
    const approved = await settle(await rt.confirm(first.view.runId, { stepId: "w", decision: "approve" }));
    expect(approved.view.status).toBe("completed");
    expect(stepOf(approved.view, "w").attempts).toBe(2);
    expect([...ledger.effects.values()]).toEqual([1]);

    const second = await settle(rt.run(plan));
    const rejected = await settle(await rt.confirm(second.view.runId, { stepId: "w", decision: "reject" }));
    expect(stepOf(rejected.view, "w")).toMatchObject({ status: "failed", error: { code: "REJECTED" } });
    expect(rejected.view.status).toBe("failed");
    expect(ledger.total()).toBe(1); // nothing more
  });

  test("reconcile answering { applied: false } retries the step without asking anyone", async () => {
    const ledger = new EffectLedger();
    const asked: string[] = [];
    const base = effectSkill(ledger);
    const withReconcile: Skill = {
      ...base,
      async reconcile(c: { idempotencyKey: string }) {
        asked.push(c.idempotencyKey);
        return { applied: false as const };
      },
    };
    const rt = createRuntime({ skills: [withReconcile], env: { intents: deadProcessClaimedAttempt1() } });
    const { view, events } = await settle(
      rt.run({ steps: [{ stepId: "w", skillName: "test.effect", arguments: { label: "w" } }] }),
    );
    expect(view.status).toBe("completed");
    expect(asked).toEqual([`${view.runId}:w`]);
    expect(stepOf(view, "w").attempts).toBe(2);
    expect([...ledger.effects.values()]).toEqual([1]);
    expect(events.some((e) => e.type === "step_waiting_confirmation")).toBe(false);
  });
});
