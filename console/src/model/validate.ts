/**
 * Checks an editor's text: JSON, optionally an object, valid against a JSON Schema (the skill's,
 * from GET /api/skills). @cfworker/json-schema interprets the schema instead of generating code,
 * so it runs under the console's CSP (no 'unsafe-eval'). Pure.
 */
import { Validator, type OutputUnit } from "@cfworker/json-schema";

export interface Validation {
  ok: boolean;
  value?: unknown;
  problems: string[];
}

export function validateJson(
  text: string,
  schema: unknown,
  opts: { object?: boolean; optional?: boolean } = {},
): Validation {
  if (opts.optional && text.trim() === "") return { ok: true, value: undefined, problems: [] };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return { ok: false, problems: [`not valid JSON: ${(e as Error).message}`] };
  }
  if (opts.object && (typeof value !== "object" || value === null || Array.isArray(value)))
    return { ok: false, problems: ["must be a JSON object"] };
  if (schema === undefined || schema === null) return { ok: true, value, problems: [] };
  const { $schema: _drop, ...rest } = schema as Record<string, unknown>;
  const r = new Validator(rest as never, "2020-12", false).validate(value);
  if (r.valid) return { ok: true, value, problems: [] };
  // the leaf errors say what is wrong; the others repeat "property X does not match"
  const leaves = r.errors.filter(
    (e: OutputUnit) =>
      !["properties", "items", "allOf", "anyOf", "$ref", "additionalProperties"].includes(e.keyword) ||
      r.errors.length === 1,
  );
  const msgs = [
    ...new Set(
      (leaves.length ? leaves : r.errors).map(
        (e: OutputUnit) => `${e.instanceLocation.replace(/^#/, "") || "/"}: ${e.error}`,
      ),
    ),
  ];
  return { ok: false, problems: msgs.slice(0, 12) };
}
