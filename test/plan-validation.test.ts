/**
 * Validation before anything runs: every problem has a stable code and an exact message.
 */
import { describe, expect, test } from "vitest";
import { z } from "zod";
import { coreSkills } from "../skills/core/index.js";
import { createRuntime, defineSkill, SkillRegistry } from "../src/index.js";
import { compilePlan, PlanValidationError } from "../src/plan/validate.js";
import { collectRefs, resolveArguments } from "../src/plan/refs.js";

const write = defineSkill({
  name: "test.write",
  description: "a side-effecting write without compensation",
  input: z.object({ n: z.number() }),
  sideEffects: "write",
  idempotent: false,
  async execute() {
    return null;
  },
});
const registry = new SkillRegistry([...coreSkills, write]);

function issueOf(plan: unknown, opts: Partial<Parameters<typeof compilePlan>[1]> = {}) {
  try {
    compilePlan(plan, { registry, ...opts });
  } catch (e) {
    expect(e).toBeInstanceOf(PlanValidationError);
    const err = e as PlanValidationError;
    return { code: err.code, message: err.message, issues: err.issues };
  }
  throw new Error("expected the plan to be rejected");
}
const pass = (stepId: string, extra: Record<string, unknown> = {}) => ({
  stepId,
  skillName: "core.pass",
  arguments: { value: 1 },
  ...extra,
});

describe("plan validation", () => {
  test.each([
    ["schema: no steps", { steps: [] }, "PLAN_INVALID", "plan.steps: Too small: expected array to have >=1 items"],
    ["schema: unknown field", { steps: [pass("a")], bogus: 1 }, "PLAN_INVALID", 'plan.: Unrecognized key: "bogus"'],
    [
      "schema: bad stepId",
      { steps: [pass("1a")] },
      "PLAN_INVALID",
      "plan.steps.0.stepId: stepId must start with a letter and use letters, digits, '_' or '-' (max 64)",
    ],
    [
      "unknown skill",
      { steps: [{ stepId: "a", skillName: "nope.skill" }] },
      "UNKNOWN_SKILL",
      'step "a": unknown skill "nope.skill" in skillName',
    ],
    [
      "unknown dependency",
      { steps: [pass("a", { dependsOn: ["ghost"] })] },
      "UNKNOWN_DEPENDENCY",
      'step "a" depends on unknown step "ghost"',
    ],
    ["duplicate stepId", { steps: [pass("a"), pass("a")] }, "DUPLICATE_STEP_ID", 'duplicate stepId "a"'],
    ["self dependency", { steps: [pass("a", { dependsOn: ["a"] })] }, "SELF_DEPENDENCY", 'step "a" depends on itself'],
    [
      "duplicate saveResultAs",
      { steps: [pass("a", { saveResultAs: "k" }), pass("b", { saveResultAs: "k" })] },
      "DUPLICATE_RESULT_KEY",
      'steps "a" and "b" both saveResultAs "k"',
    ],
    [
      "cycle",
      {
        steps: [
          pass("a", { dependsOn: ["c"] }),
          pass("b", { dependsOn: ["a"] }),
          pass("c", { dependsOn: ["b"] }),
          pass("d"),
        ],
      },
      "PLAN_CYCLE",
      "plan has a cycle: a -> b -> c -> a",
    ],
    [
      "reference to a step that is not a dependency",
      { steps: [pass("a"), { stepId: "b", skillName: "core.pass", arguments: { value: { $ref: "steps.a.x" } } }] },
      "INVALID_REFERENCE",
      'step "b": arguments.value: $ref "steps.a.x" reads step "a", which is not a (transitive) dependency of "b"',
    ],
    [
      "forbidden path segment",
      {
        steps: [
          pass("a"),
          {
            stepId: "b",
            skillName: "core.pass",
            dependsOn: ["a"],
            arguments: { value: { $ref: "steps.a.__proto__.x" } },
          },
        ],
      },
      "INVALID_REFERENCE",
      'step "b": arguments.value: $ref "steps.a.__proto__.x" uses the forbidden segment "__proto__"',
    ],
    [
      "unknown root",
      { steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: { $ref: "env.SECRET" } } }] },
      "INVALID_REFERENCE",
      'step "a": arguments.value: $ref "env.SECRET" must start with context., steps. or memory.',
    ],
    [
      "memory key saved by a step that is not a dependency",
      {
        steps: [
          pass("a", { saveResultAs: "m" }),
          { stepId: "b", skillName: "core.pass", arguments: { value: { $ref: "memory.m" } } },
        ],
      },
      "INVALID_REFERENCE",
      'step "b": arguments.$ref "memory.m" reads memory "m", saved by step "a", which is not a (transitive) dependency of "b"'.replace(
        "arguments.$ref",
        "arguments.value: $ref",
      ),
    ],
    [
      "arguments failing the skill's input schema",
      { steps: [{ stepId: "w", skillName: "core.wait", arguments: { ms: "soon" } }] },
      "INVALID_ARGUMENTS",
      'step "w": arguments do not match core.wait: ✖ Invalid input: expected number, received string;   → at ms',
    ],
  ])("%s", (_name, plan, code, message) => {
    const got = issueOf(plan);
    expect(got.code).toBe(code);
    expect(got.message).toBe(message);
  });

  test("transitive dependencies may be referenced", () => {
    const c = compilePlan(
      {
        steps: [
          pass("a"),
          pass("b", { dependsOn: ["a"] }),
          { stepId: "c", skillName: "core.pass", dependsOn: ["b"], arguments: { value: { $ref: "steps.a" } } },
        ],
      },
      { registry },
    );
    expect(c.topo).toEqual(["a", "b", "c"]);
  });

  test("context and memory references are checked when the run's context and memory are given", () => {
    const plan = {
      steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: { $ref: "context.table.id" } } }],
    };
    expect(issueOf(plan, { context: { table: {} } })).toMatchObject({
      code: "INVALID_REFERENCE",
      message: 'step "a": arguments.value: $ref "context.table.id" does not resolve in the run\'s context',
    });
    expect(() => compilePlan(plan, { registry, context: { table: { id: 7 } } })).not.toThrow();
    const m = { steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: { $ref: "memory.nope" } } }] };
    expect(issueOf(m, { memory: {} }).code).toBe("INVALID_REFERENCE");
  });

  test("arguments resolved from context are validated against the skill", () => {
    const plan = { steps: [{ stepId: "w", skillName: "core.wait", arguments: { ms: { $ref: "context.delay" } } }] };
    expect(issueOf(plan, { context: { delay: -5 } }).code).toBe("INVALID_ARGUMENTS");
    expect(() => compilePlan(plan, { registry, context: { delay: 5 } })).not.toThrow();
  });

  test("the step limit is enforced before parsing", () => {
    const steps = Array.from({ length: 11 }, (_, i) => pass(`s${i}`));
    expect(issueOf({ steps }, { maxSteps: 10 })).toMatchObject({
      code: "PLAN_TOO_LARGE",
      message: "plan has 11 steps; the limit is 10",
    });
  });

  test("all issues are reported; the first names the error", () => {
    const got = issueOf({ steps: [pass("a", { dependsOn: ["x"] }), { stepId: "b", skillName: "no.such" }] });
    expect(got.code).toBe("UNKNOWN_DEPENDENCY");
    expect(got.message).toBe('step "a" depends on unknown step "x" (and 1 more issue)');
    expect(got.issues.map((i) => i.code)).toEqual(["UNKNOWN_DEPENDENCY", "UNKNOWN_SKILL"]);
  });

  test("workspace allowlist: SKILL_NOT_ALLOWED", () => {
    expect(issueOf({ steps: [pass("a")] }, { allowSkill: (n) => n !== "core.pass" })).toMatchObject({
      code: "SKILL_NOT_ALLOWED",
      message: 'step "a": skill "core.pass" is not allowed in this workspace',
    });
  });

  test("strict rollback refuses a side effect without compensation unless accepted", () => {
    const plan = { rollbackMode: "strict", steps: [{ stepId: "w", skillName: "test.write", arguments: { n: 1 } }] };
    expect(issueOf(plan)).toMatchObject({
      code: "NOT_COMPENSABLE",
      message:
        'step "w": skill "test.write" has side effects and no compensation; strict rollback needs one (or acceptNoCompensation: true)',
    });
    expect(() =>
      compilePlan({ ...plan, steps: [{ ...plan.steps[0], acceptNoCompensation: true }] }, { registry }),
    ).not.toThrow();
    expect(() =>
      compilePlan(
        {
          ...plan,
          steps: [{ ...plan.steps[0], rollback: { kind: "skill", skillName: "core.pass", arguments: { value: 0 } } }],
        },
        { registry },
      ),
    ).not.toThrow();
  });

  test("the runtime refuses an invalid plan before creating a run", async () => {
    const rt = createRuntime();
    expect(() => rt.run({ steps: [pass("a", { dependsOn: ["a"] })] }, { runId: "never" })).toThrow(
      expect.objectContaining({ code: "SELF_DEPENDENCY" }),
    );
    await expect(rt.getRun("never")).rejects.toMatchObject({ code: "RUN_NOT_FOUND" });
  });

  test("critical-path priority uses declared durations", () => {
    const c = compilePlan(
      {
        steps: [
          { stepId: "short", skillName: "core.wait", arguments: { ms: 10 } },
          { stepId: "long", skillName: "core.wait", arguments: { ms: 100 } },
          { stepId: "tail", skillName: "core.wait", dependsOn: ["short"], arguments: { ms: 200 } },
        ],
      },
      { registry },
    );
    expect(c.byId.get("short")!.priority).toBe(210);
    expect(c.byId.get("long")!.priority).toBe(100);
  });
});

describe("references", () => {
  test("collects references at any depth with their location", () => {
    const refs = collectRefs({
      a: [{ b: { $ref: "context.x" } }],
      c: { $literal: { $ref: "ignored" } },
      d: { $ref: "steps.s.out" },
    });
    expect(refs.map((r) => [r.at, r.root, r.path])).toEqual([
      ["arguments.a.0.b", "context", ["x"]],
      ["arguments.d", "steps", ["s", "out"]],
    ]);
  });

  test("resolution copies values, reads only own properties and refuses prototype keys", () => {
    const out = { list: [1, 2] };
    const r = resolveArguments({ v: { $ref: "steps.s.list" } }, { context: {}, memory: {}, steps: { s: out } });
    expect(r).toEqual({ v: [1, 2] });
    (r.v as unknown as number[]).push(3);
    expect(out.list).toEqual([1, 2]);
    expect(() => resolveArguments({ v: { $ref: "context.toString" } }, { context: {}, memory: {}, steps: {} })).toThrow(
      /does not resolve/,
    );
    expect(() =>
      resolveArguments({ v: { $ref: "context.list.5" } }, { context: { list: [] }, memory: {}, steps: {} }),
    ).toThrow('arguments.v: $ref "context.list.5" does not resolve: "context.list.5" is missing');
    expect(() =>
      resolveArguments(JSON.parse('{"__proto__": {"x": 1}}'), { context: {}, memory: {}, steps: {} }),
    ).toThrow(/not allowed/);
  });
});

describe("status vocabulary", () => {
  test("illegal step transitions throw; the legal ones used by recovery and rollback pass", async () => {
    const { assertStepTransition } = await import("../src/kernel/status.js");
    expect(() => assertStepTransition("a", "completed", "running")).toThrow(
      "illegal transition for step a: completed -> running",
    );
    expect(() => assertStepTransition("a", "skipped", "completed")).toThrow(
      "illegal transition for step a: skipped -> completed",
    );
    for (const [from, to] of [
      ["waiting_confirmation", "completed"],
      ["rollback_failed", "completed"],
      ["retrying", "running"],
      ["running", "waiting_confirmation"],
    ] as const) {
      expect(() => assertStepTransition("a", from, to)).not.toThrow();
    }
  });
});
