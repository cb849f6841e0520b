/**
 * The schemas a model answers in. Not the runtime's ToolChainPlan schema: the model gets only the
 * fields it may set (no retry, timeoutMs, rollback, fallback, acceptNoCompensation; confirmation
 * only as `true`), `skillName` limited to the workspace's skills, and, for
 * `TOOLCHAIN_PLANNER_METHOD=jsonSchema`, the subset OpenAI's strict structured outputs accept:
 * every property required, `additionalProperties: false` everywhere, optional values nullable, only
 * supported keywords. Strict schemas cannot hold an open object, so there a step's arguments are a
 * JSON text that `fromModelPlan` parses. Pure.
 */
export type JsonSchema = Record<string, unknown>;

/** OpenAI's cap on enum values in one strict schema; beyond it the skill names go unconstrained. */
const MAX_ENUM_VALUES = 1_000;
/** The same rule as StepIdSchema (src/plan/schema.ts). */
export const STEP_ID_PATTERN = "^[A-Za-z][A-Za-z0-9_-]{0,63}$";
const RESULT_KEY_PATTERN = "^[A-Za-z_][A-Za-z0-9_]{0,63}$";
const FAILURE_POLICIES = ["fail_fast", "skip_dependents", "continue"];

const nullable = (s: JsonSchema): JsonSchema => {
  if (Array.isArray(s.enum)) return { ...s, type: [s.type, "null"], enum: [...s.enum, null] };
  return { ...s, type: [s.type, "null"] };
};

/** The plan schema for the model. `strict`: OpenAI strict structured outputs; else a plain tool schema. */
export function modelPlanSchema(skills: readonly string[], strict: boolean): JsonSchema {
  const skillName: JsonSchema = { type: "string", description: "One skill of the manifest" };
  if (skills.length > 0 && skills.length <= MAX_ENUM_VALUES) skillName.enum = [...skills];
  const optional = (s: JsonSchema) => (strict ? nullable(s) : s);
  const stepProps: Record<string, JsonSchema> = {
    stepId: {
      type: "string",
      pattern: STEP_ID_PATTERN,
      description: "Unique id: a letter, then letters, digits, '_' or '-'",
    },
    skillName,
    dependsOn: {
      type: "array",
      items: { type: "string" },
      description: "stepIds this step needs (every step it reads with $ref, directly or through another)",
    },
    arguments: strict
      ? {
          type: "string",
          description:
            'The skill\'s arguments as one JSON object written as text, e.g. "{\\"goal\\": \\"…\\", \\"tasks\\": {\\"$ref\\": \\"steps.split.tasks\\"}}"',
        }
      : {
          type: "object",
          description:
            'Arguments matching the skill\'s inputSchema; any value may be a reference {"$ref": "steps.<stepId>.<path>"} or {"$ref": "context.<path>"}',
        },
    saveResultAs: optional({
      type: "string",
      pattern: RESULT_KEY_PATTERN,
      description: "Save the output in the run's memory under this key",
    }),
    requireConfirmation: optional({
      type: "boolean",
      enum: [true],
      description: "true: ask a person before this step runs even though its skill does not require it",
    }),
    onFailure: optional({ type: "string", enum: FAILURE_POLICIES }),
    description: optional({ type: "string", description: "What the step does, for people" }),
  };
  const step: JsonSchema = {
    type: "object",
    properties: stepProps,
    additionalProperties: false,
    required: strict ? Object.keys(stepProps) : ["stepId", "skillName", "dependsOn", "arguments"],
  };
  const planProps: Record<string, JsonSchema> = {
    goal: optional({ type: "string", description: "The request's goal in a sentence" }),
    steps: { type: "array", minItems: 1, items: step },
    onFailure: optional({
      type: "string",
      enum: FAILURE_POLICIES,
      description: "What a failed step does to the rest (default skip_dependents)",
    }),
  };
  return {
    type: "object",
    properties: planProps,
    additionalProperties: false,
    required: strict ? Object.keys(planProps) : ["steps"],
  };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A problem with the model's answer that the repair round can fix (path like `steps.1.arguments`). */
export interface AnswerIssue {
  path: string;
  message: string;
}

/**
 * The model's answer as a plan the runtime validates: strict mode's nulls (a field left out) are
 * dropped, and arguments written as JSON text are parsed. Anything else passes untouched: the
 * validator names what is wrong with it.
 */
export function fromModelPlan(answer: unknown): { plan: unknown; issues: AnswerIssue[] } {
  if (!isObject(answer)) return { plan: answer, issues: [] };
  const issues: AnswerIssue[] = [];
  const dropNulls = (o: Record<string, unknown>) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null));
  const plan = dropNulls(answer);
  if (Array.isArray(plan.steps)) {
    plan.steps = plan.steps.map((raw, i) => {
      if (!isObject(raw)) return raw;
      const step = dropNulls(raw);
      if (typeof step.arguments === "string") {
        const text = step.arguments.trim();
        try {
          const parsed: unknown = text === "" ? {} : JSON.parse(text);
          if (isObject(parsed)) step.arguments = parsed;
          else issues.push({ path: `steps.${i}.arguments`, message: "the arguments text must hold one JSON object" });
        } catch (e) {
          issues.push({
            path: `steps.${i}.arguments`,
            message: `the arguments text is not JSON (${(e as Error).message})`,
          });
        }
      }
      return step;
    });
  }
  return { plan, issues };
}

// Keywords OpenAI's strict mode documents as supported (Structured Outputs, "Supported schemas").
const STRICT_KEYWORDS = new Set([
  "type",
  "description",
  "title",
  "enum",
  "const",
  "anyOf",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "$ref",
  "$defs",
  "pattern",
  "format",
  "multipleOf",
  "maximum",
  "exclusiveMaximum",
  "minimum",
  "exclusiveMinimum",
  "minItems",
  "maxItems",
]);
const STRICT_FORMATS = new Set(["date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"]);

/**
 * A JSON Schema (as `z.toJSONSchema(schema, { io: "input" })` writes it) turned into one OpenAI's
 * strict mode accepts: optional properties become required and nullable (strip the nulls from the
 * answer with `dropNullProperties`), unsupported keywords go (the runtime's zod parse still checks
 * them). An open object (a record) cannot be expressed: TypeError naming where.
 */
export function toStrictSchema(schema: JsonSchema, at = "schema"): JsonSchema {
  const out: JsonSchema = {};
  for (const [k, v] of Object.entries(schema)) {
    if (!STRICT_KEYWORDS.has(k)) continue;
    if (k === "format" && !STRICT_FORMATS.has(String(v))) continue;
    out[k] = v;
  }
  if (Array.isArray(schema.anyOf))
    out.anyOf = schema.anyOf.map((s, i) => toStrictSchema(s as JsonSchema, `${at}.anyOf.${i}`));
  if (isObject(schema.items)) out.items = toStrictSchema(schema.items, `${at}.items`);
  if (isObject(schema.$defs))
    out.$defs = Object.fromEntries(
      Object.entries(schema.$defs).map(([k, s]) => [k, toStrictSchema(s as JsonSchema, `${at}.$defs.${k}`)]),
    );
  if (schema.type === "object" || isObject(schema.properties)) {
    if (
      isObject(schema.additionalProperties) ||
      schema.additionalProperties === true ||
      schema.propertyNames !== undefined
    )
      throw new TypeError(`${at} is an open object (a record): strict structured outputs cannot express it`);
    const props = isObject(schema.properties) ? schema.properties : {};
    const required = new Set(Array.isArray(schema.required) ? (schema.required as string[]) : []);
    out.properties = Object.fromEntries(
      Object.entries(props).map(([k, s]) => {
        const strict = toStrictSchema(s as JsonSchema, `${at}.properties.${k}`);
        return [k, required.has(k) ? strict : orNull(strict)];
      }),
    );
    out.required = Object.keys(props);
    out.additionalProperties = false;
  }
  return out;
}

function orNull(s: JsonSchema): JsonSchema {
  if (typeof s.type === "string" && !s.anyOf && !s.$ref) return nullable(s);
  return { anyOf: [s, { type: "null" }] };
}

/** Object properties that are null, removed at every depth (strict mode's way to leave one out). */
export function dropNullProperties(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(dropNullProperties);
  if (!isObject(v)) return v;
  return Object.fromEntries(
    Object.entries(v)
      .filter(([, x]) => x !== null)
      .map(([k, x]) => [k, dropNullProperties(x)]),
  );
}
