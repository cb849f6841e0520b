/**
 * The pure decision after an attempt (src/kernel/after-attempt.ts) and the one confirmation rule
 * (src/kernel/confirmation.ts), over generated attempts, skills, policies and plan flags.
 */
import { fc, test } from "@fast-check/vitest";
import { expect } from "vitest";
import { z } from "zod";
import { afterAttempt, type AttemptOutcome } from "../src/kernel/after-attempt.js";
import { alwaysAsks, confirmationRequired, mayRelax, plannedConfirmation } from "../src/kernel/confirmation.js";
import { ERROR_CODES, ErrorCode } from "../src/kernel/errors.js";
import { compileRetry } from "../src/plan/retry-policy.js";
import { hasSideEffects, type Skill } from "../src/skills/contract.js";

const outcome: fc.Arbitrary<AttemptOutcome> = fc.oneof(
  fc.constant({ ok: true as const, output: 1 }),
  fc.constant({ ok: false as const, inDoubt: true as const }),
  fc.record({
    ok: fc.constant(false as const),
    error: fc.record(
      {
        code: fc.constantFrom(...ERROR_CODES),
        message: fc.constant("x"),
        effectStarted: fc.option(fc.boolean(), { nil: undefined }),
      },
      { requiredKeys: ["code", "message"] },
    ),
  }),
);
const skill = fc.record({
  sideEffects: fc.constantFrom("none", "read", "write", "external" as const),
  idempotent: fc.boolean(),
});
const input = fc.record({
  unit: fc.constantFrom("step" as const, "fallback" as const),
  outcome,
  attempt: fc.integer({ min: 1, max: 12 }),
  halted: fc.boolean(),
  retry: fc
    .integer({ min: 1, max: 10 })
    .map((maxAttempts) => compileRetry({ maxAttempts, backoff: { kind: "fixed", initialMs: 10 } })),
  skill,
  fallback: fc.constantFrom(undefined, "value" as const, "skill" as const),
  random: fc.constant(() => 0.5),
});

test.prop([input], { numRuns: 2_000 })(
  "after an attempt: safe retries only, no fallback of a fallback, nothing new after a halt",
  (i) => {
    const next = afterAttempt(i);
    const o = i.outcome;
    if (o.ok) {
      expect(next.kind).toBe("complete");
      return;
    }
    if ("inDoubt" in o) {
      expect(next.kind).toBe("reconcile"); // in doubt is never retried blindly
      return;
    }
    if (next.kind === "retry") {
      expect(i.halted).toBe(false);
      expect(i.unit).toBe("step");
      expect(i.attempt).toBeLessThan(i.retry.maxAttempts);
      expect(i.retry.retryOn.has(o.error.code)).toBe(true);
      // a non-idempotent side effect is repeated only when its effect certainly did not start
      if (hasSideEffects(i.skill) && !i.skill.idempotent) expect(o.error.effectStarted).toBe(false);
      expect(next.delayMs).toBeGreaterThanOrEqual(0);
    }
    if (next.kind === "fallback_value" || next.kind === "fallback_skill") {
      expect(i.unit).toBe("step");
      expect(i.halted).toBe(false);
      expect(next.kind === "fallback_value" ? "value" : "skill").toBe(i.fallback);
    }
    if (i.unit === "fallback") expect(["fail", "cancelled"]).toContain(next.kind);
    if (next.kind === "cancelled")
      expect(i.halted && [ErrorCode.CANCELLED, ErrorCode.DEADLINE_EXCEEDED].includes(o.error.code as never)).toBe(true);
  },
);

const mk = (o: Partial<Skill>): Skill =>
  ({
    name: "t.s",
    description: "",
    input: z.object({ n: z.number() }),
    sideEffects: "none",
    idempotent: true,
    execute: async () => null,
    ...o,
  }) as Skill;
const ruleSkill = fc
  .record({
    requiresConfirmation: fc.constantFrom(undefined, false, true, (a: { n: number }) => a.n > 0),
    sideEffects: fc.constantFrom("none", "read", "write", "external" as const),
    compensable: fc.boolean(),
  })
  .map((r) =>
    mk({
      requiresConfirmation: r.requiresConfirmation,
      sideEffects: r.sideEffects,
      ...(r.compensable ? { compensate: async () => undefined } : {}),
    }),
  );

test.prop([ruleSkill, fc.constantFrom(undefined, true, false), fc.integer({ min: -2, max: 2 }), fc.boolean()], {
  numRuns: 1_000,
})(
  "the confirmation rule: a plan tightens freely; an external irreversible skill always asks; an approval answers it",
  (s, planned, n, approved) => {
    const asks = confirmationRequired(s, { n }, planned, approved);
    if (approved) {
      expect(asks).toBe(false);
      return;
    }
    if (planned === true) expect(asks).toBe(true);
    const own =
      typeof s.requiresConfirmation === "function" ? s.requiresConfirmation({ n }) : Boolean(s.requiresConfirmation);
    // the skill's own rule holds unless a plan may remove it (never for an external irreversible skill)
    if (planned === undefined || alwaysAsks(s)) expect(asks).toBe(planned === true || own);
    // what `toolchain plan` and the agent tools say agrees with what will happen
    const said = plannedConfirmation(s, planned, { n });
    expect(said === "yes").toBe(asks);
    const conditional =
      typeof s.requiresConfirmation === "function" && (planned === undefined || (planned === false && alwaysAsks(s)));
    expect(plannedConfirmation(s, planned, undefined)).toBe(conditional ? "maybe" : asks ? "yes" : "no");
    // only a permitted person may remove a confirmation, never from an always-asking skill
    if (s.requiresConfirmation) {
      expect(mayRelax(s, { kind: "model" })).toBe(false);
      expect(mayRelax(s, { kind: "agent" })).toBe(false);
      expect(mayRelax(s, { kind: "person" })).toBe(false); // without the permission
    }
    if (alwaysAsks(s)) expect(mayRelax(s, { kind: "person", mayRelaxConfirmation: true })).toBe(false);
  },
);
