/**
 * README promise (Security and limits, "durations in a plan"): `deadlineMs` ≤ 2^31-1 ms,
 * `timeoutMs` ≤ 24 h and backoff ≤ 1 h, a longer value refused with PLAN_INVALID naming the
 * field; and no computed retry delay goes beyond 1 h (an exponential backoff without `maxMs`
 * stops growing there), nor a skill's retryAfterMs beyond what a timer can hold.
 */
import { fc, test as propTest } from "@fast-check/vitest";
import { describe, expect, test } from "vitest";
import { createRuntime } from "../src/index.js";
import { ErrorCode } from "../src/kernel/errors.js";
import { compileRetry, decideRetry } from "../src/plan/retry-policy.js";
import { MAX_BACKOFF_MS, MAX_TIMER_MS, RetrySpecSchema } from "../src/plan/schema.js";

const rt = createRuntime();
const refusal = (plan: unknown) => {
  try {
    rt.validate(plan);
  } catch (e) {
    const x = e as { code: string; message: string; details: { issues: { path: string }[] } };
    return { code: x.code, message: x.message, path: x.details.issues[0]!.path };
  }
  return "valid";
};
const step = (extra: Record<string, unknown>) => ({
  steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: 1 }, ...extra }],
});

describe("duration bounds in a plan", () => {
  test.each([
    [step({ timeoutMs: 86_400_001 }), "steps.0.timeoutMs", "Too big: expected number to be <=86400000"],
    [
      step({ retry: { backoff: { kind: "fixed", initialMs: 3_600_001 } } }),
      "steps.0.retry.backoff.initialMs",
      "Too big: expected number to be <=3600000",
    ],
    [
      step({ retry: { backoff: { kind: "exponential", initialMs: 1, maxMs: 3_600_001 } } }),
      "steps.0.retry.backoff.maxMs",
      "Too big: expected number to be <=3600000",
    ],
  ])("%j is refused naming %s", (plan, path, why) => {
    expect(refusal(plan)).toEqual({ code: "PLAN_INVALID", message: `plan.${path}: ${why}`, path });
  });

  test("deadlineMs above 2^31-1 is refused; the bounds themselves are accepted", () => {
    expect(refusal({ ...step({}), deadlineMs: 2 ** 31 })).toMatchObject({
      code: "PLAN_INVALID",
      message: "plan.deadlineMs: deadlineMs must be at most 2147483647 ms (2^31-1, the longest timer Node can hold)",
    });
    expect(
      refusal({
        ...step({
          timeoutMs: 86_400_000,
          retry: { backoff: { kind: "exponential", initialMs: 3_600_000, maxMs: 3_600_000 } },
        }),
        deadlineMs: MAX_TIMER_MS,
      }),
    ).toBe("valid");
  });
});

describe("computed retry delays", () => {
  const safe = { sideEffects: "none", idempotent: true } as const;
  const err = (retryAfterMs?: number) => ({
    code: ErrorCode.RATE_LIMITED,
    message: "busy",
    ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
  });

  test("an exponential backoff without maxMs stops growing at 1 h", () => {
    const p = compileRetry(
      RetrySpecSchema.parse({ maxAttempts: 10, backoff: { kind: "exponential", initialMs: 1_000 } }),
    );
    const delays = [1, 2, 9].map((a) => (decideRetry(p, safe, err(), a) as { delayMs: number }).delayMs);
    expect(delays).toEqual([1_000, 2_000, 256_000]);
    const long = compileRetry(
      RetrySpecSchema.parse({ maxAttempts: 10, backoff: { kind: "exponential", initialMs: 3_600_000 } }),
    );
    expect(decideRetry(long, safe, err(), 9)).toEqual({ retry: true, delayMs: MAX_BACKOFF_MS });
  });

  propTest.prop([
    fc.record({
      kind: fc.constantFrom("fixed", "exponential"),
      initialMs: fc.integer({ min: 0, max: MAX_BACKOFF_MS }),
      maxMs: fc.option(fc.integer({ min: 0, max: MAX_BACKOFF_MS }), { nil: undefined }),
      jitter: fc.boolean(),
    }),
    fc.integer({ min: 1, max: 9 }),
    fc.option(fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }), { nil: undefined }),
  ])("every delay is within 1 h, or the skill's retryAfterMs held to the timer limit", (backoff, attempt, after) => {
    const b = Object.fromEntries(Object.entries(backoff).filter(([, v]) => v !== undefined));
    const p = compileRetry(RetrySpecSchema.parse({ maxAttempts: 10, backoff: b }));
    const d = decideRetry(p, safe, err(after), attempt) as { retry: true; delayMs: number };
    expect(d.retry).toBe(true);
    expect(d.delayMs).toBeGreaterThanOrEqual(0);
    expect(d.delayMs).toBeLessThanOrEqual(Math.max(MAX_BACKOFF_MS, Math.min(after ?? 0, MAX_TIMER_MS)));
    if (after !== undefined) expect(d.delayMs).toBeGreaterThanOrEqual(Math.min(after, MAX_TIMER_MS));
  });
});
