/**
 * The pure decisions of the rollback walk (src/kernel/after-compensation.ts), over generated
 * compensation outcomes, retry policies, rollback modes and cancels.
 */
import { fc, test } from "@fast-check/vitest";
import { expect } from "vitest";
import {
  afterCompensation,
  afterCompensationAttempt,
  type CompensationAttemptOutcome,
  type CompensationResult,
} from "../src/kernel/after-compensation.js";
import { ERROR_CODES, ErrorCode, type StepError } from "../src/kernel/errors.js";
import { compileRetry } from "../src/plan/retry-policy.js";

const stepError: fc.Arbitrary<StepError> = fc.record(
  {
    code: fc.constantFrom(...ERROR_CODES),
    message: fc.constantFrom("x", "y"),
    effectStarted: fc.option(fc.boolean(), { nil: undefined }),
  },
  { requiredKeys: ["code", "message"] },
);
const attemptOutcome: fc.Arbitrary<CompensationAttemptOutcome> = fc.oneof(
  fc.constant({ ok: true as const }),
  fc.record(
    { ok: fc.constant(false as const), error: stepError, final: fc.boolean() },
    { requiredKeys: ["ok", "error"] },
  ),
);
const attemptInput = fc.record({
  outcome: attemptOutcome,
  attempt: fc.integer({ min: 1, max: 12 }),
  stopped: fc.option(stepError, { nil: undefined }),
  retry: fc
    .integer({ min: 1, max: 10 })
    .map((maxAttempts) => compileRetry({ maxAttempts, backoff: { kind: "fixed", initialMs: 10 } })),
  random: fc.constant(() => 0.5),
});

test.prop([attemptInput], { numRuns: 2_000 })(
  "after a compensation attempt: done when it succeeded; retried only within the policy, never in doubt, never after a cancel",
  (i) => {
    const next = afterCompensationAttempt(i);
    const o = i.outcome;
    if (o.ok) {
      expect(next).toEqual({ kind: "done" });
      return;
    }
    expect(next.kind).not.toBe("done");
    if (next.kind === "retry") {
      expect(o.final).not.toBe(true); // in doubt: an operator decides, never repeated blindly
      expect(i.stopped).toBeUndefined();
      expect(i.attempt).toBeLessThan(i.retry.maxAttempts);
      expect(i.retry.retryOn.has(o.error.code)).toBe(true);
      // a compensation is idempotent by contract: a started effect does not stop its retry
      expect(next.delayMs).toBe(10);
      return;
    }
    if (next.kind !== "give_up") throw new Error(`unexpected ${next.kind}`);
    // the attempt's own error, except that a cancel is reported as the cancel's reason
    const byCancel = !o.final && i.stopped && o.error.code !== ErrorCode.CANCELLED;
    expect(next.error).toEqual(byCancel ? i.stopped : o.error);
  },
);

const result: fc.Arbitrary<CompensationResult> = fc.oneof(
  fc.constant({ ok: true as const }),
  fc.record({ ok: fc.constant(false as const), error: stepError }),
  fc.constant({ ok: false as const, notCompensable: true as const }),
);

test.prop([fc.constantFrom("strict" as const, "best_effort" as const), result, fc.boolean()], { numRuns: 1_000 })(
  "after a compensation: best_effort walks on unless cancelled; strict blocks on a failure, stops on what cannot be undone",
  (mode, r, stopped) => {
    const after = afterCompensation(mode, r, stopped);
    const cancel = !r.ok && "error" in r && r.error.code === ErrorCode.CANCELLED && stopped;
    // what is recorded follows from the result alone (a cancel only turns a CANCELLED failure into a stop)
    expect(after.kind).toBe(
      r.ok ? "rolled_back" : "notCompensable" in r ? "not_compensable" : cancel ? "cancelled" : "failed",
    );
    if (after.kind === "cancelled") expect(after.next).toBe("stop");
    else if (mode === "best_effort") expect(after.next).toBe("continue");
    // only strict waits for an operator, and only on a failure someone could retry
    if (after.next === "block") expect([mode, after.kind]).toEqual(["strict", "failed"]);
    if (mode === "strict" && after.kind === "failed") expect(after.next).toBe("block");
    if (mode === "strict" && after.kind === "not_compensable") expect(after.next).toBe("stop");
    if (after.kind === "rolled_back") expect(after.next).toBe("continue");
  },
);
