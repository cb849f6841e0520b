/**
 * Can a skill's output have this path? A `$ref` to `steps.split.taskList` when the split skill
 * declares `{ tasks: [...] }` is certain to fail at run time, after the steps before it ran (and
 * their side effects happened); validation refuses it instead. Read from the skill's declared
 * output schema (zod, as JSON Schema): a path is refused only when the schema says for certain
 * that no output can have it (a closed object without that key, an array indexed by a name, a
 * primitive indexed at all). Anything the schema leaves open is admitted. Pure.
 */
import { z } from "zod";
import type { Skill } from "../skills/contract.js";

type Schema = Record<string, unknown> | boolean;

export type PathCheck =
  | { ok: true }
  | {
      ok: false;
      /** index of the first segment no output can have */ at: number;
      /** the keys the schema declares there */ known: string[];
    };

const cache = new WeakMap<z.ZodType, Schema | undefined>();

/** The skill's declared output schema as JSON Schema (cached), or undefined when it declares none. */
export function outputJsonSchema(skill: Pick<Skill, "output">): Schema | undefined {
  if (!skill.output) return undefined;
  if (!cache.has(skill.output)) {
    let json: Schema | undefined;
    try {
      json = z.toJSONSchema(skill.output, { io: "output", unrepresentable: "any", cycles: "ref" }) as Schema;
    } catch {
      json = undefined; // not expressible: nothing can be checked
    }
    cache.set(skill.output, json);
  }
  return cache.get(skill.output);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const typesOf = (s: Record<string, unknown>): string[] | undefined =>
  typeof s.type === "string" ? [s.type] : Array.isArray(s.type) ? (s.type as string[]) : undefined;
const MAX_DEPTH = 64;

/** Whether some value of `schema` has `path`. */
export function checkPath(schema: Schema, path: readonly string[]): PathCheck {
  const root = schema;
  let deepest: { at: number; known: string[] } = { at: -1, known: [] };
  const resolve = (ref: string): Schema | undefined => {
    if (ref === "#") return root;
    const m = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref);
    const defs = isObject(root) ? root[m?.[1] ?? "$defs"] : undefined;
    return m && isObject(defs) ? (defs[decodeURIComponent(m[2]!)] as Schema | undefined) : undefined;
  };
  const admits = (s: Schema | undefined, i: number, depth: number): boolean => {
    if (i === path.length || s === undefined || s === true || depth > MAX_DEPTH) return true;
    if (s === false) return false;
    if (typeof s.$ref === "string") {
      const target = resolve(s.$ref);
      if (target === undefined || !admits(target, i, depth + 1)) return target === undefined;
    }
    for (const k of ["anyOf", "oneOf"] as const) {
      if (Array.isArray(s[k]) && !(s[k] as Schema[]).some((x) => admits(x, i, depth + 1))) return false;
    }
    if (Array.isArray(s.allOf) && !(s.allOf as Schema[]).some((x) => admits(x, i, depth + 1))) return false;
    const seg = path[i]!;
    const types = typesOf(s);
    const objectish = types ? types.includes("object") : isObject(s.properties) || s.additionalProperties !== undefined;
    const arrayish = types ? types.includes("array") : s.items !== undefined || s.prefixItems !== undefined;
    if (!types && !objectish && !arrayish) return true; // unconstrained here
    const fail = (known: string[]) => {
      if (i > deepest.at) deepest = { at: i, known };
      return false;
    };
    if (objectish) {
      const props = isObject(s.properties) ? s.properties : {};
      if (Object.prototype.hasOwnProperty.call(props, seg)) {
        if (admits(props[seg] as Schema, i + 1, depth + 1)) return true;
      } else if (
        isObject(s.patternProperties) &&
        Object.entries(s.patternProperties).some(
          ([re, x]) => new RegExp(re, "u").test(seg) && admits(x as Schema, i + 1, depth + 1),
        )
      ) {
        return true;
      } else if (s.additionalProperties === undefined || s.additionalProperties === true) {
        return true;
      } else if (isObject(s.additionalProperties)) {
        if (admits(s.additionalProperties, i + 1, depth + 1)) return true;
      } else if (!arrayish) return fail(Object.keys(props));
    }
    if (arrayish) {
      if (!/^(0|[1-9]\d*)$/.test(seg)) return objectish ? false : fail([]);
      const idx = Number(seg);
      const prefix = Array.isArray(s.prefixItems) ? (s.prefixItems as Schema[]) : undefined;
      if (prefix && idx < prefix.length) return admits(prefix[idx], i + 1, depth + 1);
      if (prefix && s.items === false) return fail([]);
      return admits(s.items as Schema | undefined, i + 1, depth + 1);
    }
    return objectish ? false : fail([]);
  };
  return admits(schema, 0, 0) ? { ok: true } : { ok: false, at: Math.max(0, deepest.at), known: deepest.known };
}
