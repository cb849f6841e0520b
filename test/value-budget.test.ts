/**
 * The one value budget (TOOLCHAIN_MAX_VALUE_BYTES), pure: JSON sizes counted without
 * serializing, reference resolution that stops at the budget (fan-out of one large value),
 * results and boundary values over it, and validation refusing what is statically over it.
 */
import { describe, expect, test } from "vitest";
import { ErrorCode } from "../src/kernel/errors.js";
import { assertStorable, unstorableResult } from "../src/kernel/storable.js";
import { DEFAULT_MAX_VALUE_BYTES, jsonBytes, maxValueBytes } from "../src/kernel/value-budget.js";
import { resolveArguments } from "../src/plan/refs.js";
import { compilePlan } from "../src/plan/validate.js";
import { SkillRegistry } from "../src/skills/registry.js";
import { coreSkills } from "../skills/core/index.js";

const thrown = (f: () => unknown): any => {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error("expected a throw");
};

describe("jsonBytes", () => {
  test("equals JSON.stringify's UTF-8 length for values without escapes", () => {
    for (const v of [
      null,
      true,
      false,
      0,
      -12.5,
      1e21,
      "",
      "abc",
      "é✓😀",
      [],
      {},
      [1, "a", null],
      { a: 1, bc: [true, { d: "x" }] },
      { "k é": ["v", 2] },
    ]) {
      expect(jsonBytes(v), JSON.stringify(v)).toBe(Buffer.byteLength(JSON.stringify(v)));
    }
  });
  test("stops at the limit: limit + 1 without walking the rest", () => {
    const big = Array.from({ length: 100_000 }, () => "x".repeat(100));
    expect(jsonBytes(big, 1_000)).toBe(1_001);
    expect(jsonBytes("y".repeat(5_000), 1_000)).toBe(1_001);
  });
  test("the budget comes from TOOLCHAIN_MAX_VALUE_BYTES (4 MiB by default), checked", () => {
    expect(maxValueBytes({})).toBe(DEFAULT_MAX_VALUE_BYTES);
    expect(maxValueBytes({ TOOLCHAIN_MAX_VALUE_BYTES: "65536" })).toBe(65_536);
    expect(() => maxValueBytes({ TOOLCHAIN_MAX_VALUE_BYTES: "lots" })).toThrow(
      'Expected TOOLCHAIN_MAX_VALUE_BYTES to be an integer from 1024 to 2147483647, got "lots"',
    );
  });
});

describe("resolveArguments counts while it resolves", () => {
  const hundredKb = "z".repeat(100_000);
  const fanOut = { value: Array.from({ length: 1_000 }, () => ({ $ref: "steps.big" })) };

  test("1,000 references to a 100 KB output: VALUE_TOO_LARGE at the reference that crosses the budget, quickly", () => {
    const t0 = performance.now();
    const e = thrown(() =>
      resolveArguments(fanOut, { context: {}, memory: {}, steps: { big: hundredKb } }, "arguments", {
        maxBytes: 1_000_000,
        stepId: "fan",
      }),
    );
    expect(performance.now() - t0).toBeLessThan(500);
    expect(e.code).toBe(ErrorCode.VALUE_TOO_LARGE);
    // 1,000,000 / 100,002 bytes: the 10th reference (index 9) is the one over
    expect(e.message).toBe(
      'step "fan": arguments.value.9: the resolved arguments are larger than the value budget of 977 KiB (TOOLCHAIN_MAX_VALUE_BYTES)',
    );
    expect(e.details).toEqual({ stepId: "fan", field: "arguments.value.9", limit: 1_000_000 });
  });

  test("the default budget applies without a parameter (call sites need not change)", () => {
    const e = thrown(() => resolveArguments(fanOut, { context: {}, memory: {}, steps: { big: hundredKb } }));
    expect(e.code).toBe(ErrorCode.VALUE_TOO_LARGE);
    expect(e.details.limit).toBe(maxValueBytes());
  });

  test("an object named many times is measured once (and copied per reference)", () => {
    const out = { rows: Array.from({ length: 100 }, (_, i) => ({ i })) };
    const r = resolveArguments(
      { a: { $ref: "steps.s" }, b: { $ref: "steps.s" } },
      { context: {}, memory: {}, steps: { s: out } },
      "arguments",
      { maxBytes: 10_000 },
    );
    expect(r).toEqual({ a: out, b: out });
    expect(r.a).not.toBe(r.b);
  });

  test("literals count too", () => {
    const e = thrown(() =>
      resolveArguments(
        { a: "q".repeat(2_000), b: { $literal: "w".repeat(2_000) } },
        { context: {}, memory: {}, steps: {} },
        "rollback.arguments",
        { maxBytes: 3_000 },
      ),
    );
    expect(e.code).toBe(ErrorCode.VALUE_TOO_LARGE);
    expect(e.message).toContain("rollback.arguments.b: the resolved arguments are larger than the value budget");
  });
});

describe("results and boundary values", () => {
  test("an output or preview over the budget fails the step with VALUE_TOO_LARGE naming the skill and field", () => {
    const r = unstorableResult({ rows: ["x".repeat(3_000)] }, "preview", "test.big", 2_048);
    expect(r).toEqual({
      code: "VALUE_TOO_LARGE",
      message:
        "preview: the preview test.big returned is larger than the value budget of 2 KiB (TOOLCHAIN_MAX_VALUE_BYTES)",
      details: { field: "preview", limit: 2_048 },
      effectStarted: true,
    });
    expect(unstorableResult({ rows: ["x"] }, "output", "test.big", 2_048)).toBeUndefined();
  });
  test("context, memory and decisions over the budget are refused at the boundary", () => {
    const e = thrown(() => assertStorable({ a: "x".repeat(5_000) }, "context", 4_096));
    expect([e.code, e.message]).toEqual([
      "VALUE_TOO_LARGE",
      "context: the value is larger than the value budget of 4 KiB (TOOLCHAIN_MAX_VALUE_BYTES)",
    ]);
  });
});

describe("validation refuses what is statically over the budget", () => {
  const registry = new SkillRegistry([...coreSkills]);
  const plan = (args: unknown, extra: Record<string, unknown> = {}) => ({
    steps: [{ stepId: "s1", skillName: "core.pass", arguments: args, ...extra }],
  });

  test("literal arguments over it", () => {
    const e = thrown(() => compilePlan(plan({ value: "x".repeat(5_000) }), { registry, maxValueBytes: 4_096 }));
    expect(e.code).toBe(ErrorCode.VALUE_TOO_LARGE);
    expect(e.details.issues[0]).toEqual({
      code: "VALUE_TOO_LARGE",
      message:
        'step "s1": arguments: the resolved arguments are larger than the value budget of 4 KiB (TOOLCHAIN_MAX_VALUE_BYTES)',
      stepId: "s1",
      path: "arguments",
    });
  });

  test("a context value named many times (fan-out), even beside step references", () => {
    const context = { blob: "c".repeat(1_000) };
    const p = {
      steps: [
        { stepId: "a", skillName: "core.pass", arguments: { value: 1 } },
        {
          stepId: "s1",
          skillName: "core.pass",
          dependsOn: ["a"],
          arguments: { value: [{ $ref: "steps.a" }, ...Array.from({ length: 10 }, () => ({ $ref: "context.blob" }))] },
        },
      ],
    };
    const e = thrown(() => compilePlan(p, { registry, context, maxValueBytes: 8_192 }));
    expect(e.details.issues.map((i: any) => [i.code, i.stepId, i.path])).toEqual([
      ["VALUE_TOO_LARGE", "s1", "arguments"],
    ]);
    // the same plan fits a budget the bound is under
    expect(compilePlan(p, { registry, context, maxValueBytes: 16_384 }).steps).toHaveLength(2);
  });

  test("a fallback value over it", () => {
    const e = thrown(() =>
      compilePlan(plan({ value: 1 }, { fallback: { value: "f".repeat(5_000) } }), { registry, maxValueBytes: 4_096 }),
    );
    expect(e.details.issues[0]).toMatchObject({ code: "VALUE_TOO_LARGE", stepId: "s1", path: "fallback.value" });
  });
});
