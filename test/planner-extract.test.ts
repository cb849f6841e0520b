/**
 * The pure parts under the planner's model path: reading a JSON object out of what a model wrote,
 * whether a declared output schema can have a reference's path, and the strict-schema conversion
 * (checked with the independent OpenAI strict-mode checker).
 */
import { describe, expect, test } from "vitest";
import { z } from "zod";
import { checkPath } from "../src/plan/output-paths.js";
import { extractJsonObject, looksLikePlan, unwrapArguments } from "../src/planner/extract.js";
import { dropNullProperties, fromModelPlan, modelPlanSchema, toStrictSchema } from "../src/planner/model-schema.js";
import { strictViolations } from "./helpers/openai-strict.js";

const plan = { steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: "a } with { braces" } }] };

describe("reading a JSON object out of a model's answer", () => {
  test("whole, fenced, in prose (braces inside strings skipped), double-encoded; a plan preferred over other objects", () => {
    const json = JSON.stringify(plan);
    for (const text of [
      json,
      `  ${json}\n`,
      "```json\n" + json + "\n```",
      "```\n" + json + "```",
      `Here you go: ${json}. Done!`,
      `{"thought": "first"} then ${json}`,
      JSON.stringify(json),
    ]) {
      expect(extractJsonObject(text, looksLikePlan)).toEqual({ ok: true, value: plan });
    }
    expect(unwrapArguments({ plan }, looksLikePlan)).toEqual({ ok: true, value: plan });
    expect(unwrapArguments({ plan: json }, looksLikePlan)).toEqual({ ok: true, value: plan });
  });

  test("what cannot be read says why (for the repair round)", () => {
    expect(extractJsonObject("   ")).toEqual({ ok: false, error: "the answer is empty" });
    expect(extractJsonObject("[1, 2]")).toEqual({
      ok: false,
      error: "the answer is JSON but not an object (an array)",
    });
    const cut = extractJsonObject('Plan: {"steps": [{"stepId": "a"');
    expect(cut.ok).toBe(false);
    expect(!cut.ok && cut.error).toContain("never closed (a truncated answer?)");
    const prose = extractJsonObject("I would split the work first.");
    expect(!prose.ok && prose.error).toMatch(
      /^no JSON object found in the answer \(.*\); it starts with "I would split the work first\."$/,
    );
  });

  test("strict mode's encodings are read back: nulls dropped, arguments text parsed, bad text named by path", () => {
    const strict = {
      goal: null,
      onFailure: null,
      steps: [
        {
          stepId: "a",
          skillName: "core.pass",
          dependsOn: [],
          arguments: '{"value": null}',
          saveResultAs: null,
          requireConfirmation: null,
          onFailure: null,
          description: null,
        },
      ],
    };
    expect(fromModelPlan(strict)).toEqual({
      plan: { steps: [{ stepId: "a", skillName: "core.pass", dependsOn: [], arguments: { value: null } }] },
      issues: [],
    });
    expect(fromModelPlan({ steps: [{ stepId: "a", arguments: "[1]" }] }).issues).toEqual([
      { path: "steps.0.arguments", message: "the arguments text must hold one JSON object" },
    ]);
    expect(dropNullProperties({ a: null, b: [{ c: null, d: 1 }] })).toEqual({ b: [{ d: 1 }] });
  });
});

describe("strict schemas", () => {
  test("the plan schema and converted zod schemas pass OpenAI's strict rules; an open object cannot be converted", () => {
    expect(strictViolations(modelPlanSchema(["core.pass", "qtable.task.split"], true))).toEqual([]);
    const Task = z.object({
      key: z
        .string()
        .min(1)
        .max(64)
        .regex(/^[a-z]+$/),
      title: z.string().min(1),
      note: z.string().default(""),
      tags: z.array(z.string()).max(5).optional(),
      when: z.iso.date().optional(),
      kind: z.enum(["a", "b"]).optional(),
    });
    const converted = toStrictSchema(
      z.toJSONSchema(z.object({ tasks: z.array(Task) }), { io: "input" }) as Record<string, unknown>,
    );
    expect(strictViolations(converted)).toEqual([]);
    expect(() =>
      toStrictSchema(z.toJSONSchema(z.object({ args: z.record(z.string(), z.unknown()) })) as Record<string, unknown>),
    ).toThrow("schema.properties.args is an open object (a record)");
    // the checker is not a rubber stamp
    expect(
      strictViolations({ type: "object", properties: { a: { type: "string", minLength: 1 } }, required: [] }),
    ).toEqual([
      "schema: additionalProperties must be false",
      'schema: property "a" is not in required',
      'schema.properties.a: keyword "minLength" is not supported',
    ]);
  });
});

describe("reference paths against a declared output schema", () => {
  const schema = z.toJSONSchema(
    z.object({
      tasks: z.array(z.object({ key: z.string(), meta: z.record(z.string(), z.number()) })),
      pair: z.tuple([z.string(), z.object({ x: z.number() })]),
      either: z.union([z.object({ a: z.number() }), z.object({ b: z.number() })]),
      loose: z.looseObject({ known: z.string() }),
      anything: z.unknown(),
    }),
    { io: "output" },
  ) as Record<string, unknown>;
  test.each([
    ["tasks.0.key", true],
    ["tasks.0.meta.whatever", true],
    ["loose.unknownKey", true],
    ["anything.deep.path", true],
    ["either.a", true],
    ["either.b", true],
    ["pair.1.x", true],
    ["taskList", false],
    ["tasks.first", false],
    ["tasks.0.key.length", false],
    ["either.c", false],
    ["pair.1.y", false],
  ])("%s: %s", (path, ok) => {
    expect(checkPath(schema, path.split(".")).ok).toBe(ok);
  });
});
