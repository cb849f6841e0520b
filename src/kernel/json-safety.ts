/**
 * Which values the run history can store. Postgres `jsonb` and `text` reject the NUL character
 * (22P05 / 22021) and `jsonb` rejects lone UTF-16 surrogates (JSON.stringify writes them as
 * `\udXXX` escapes); JSON has no bigint, NaN or Infinity; Postgres' JSON parser and our own
 * recursive walkers (references, views) need a bounded depth; an own `__proto__` key is read as
 * the prototype by ordinary JavaScript (spread, Object.assign, zod records) and silently lost.
 * Pure, no imports (src/kernel/errors.ts uses it to make every step error storable); the
 * policy built on it is in src/kernel/storable.ts.
 */

/** Values nested deeper than this (objects/arrays inside each other) are refused. */
export const MAX_VALUE_DEPTH = 64;

export interface Unstorable {
  /** Where, as a dotted path starting with the field name (`context.a.0.b`). */
  path: string;
  reason:
    "nul_character" | "lone_surrogate" | "bigint" | "non_finite_number" | "too_deep" | "proto_key" | "unsupported_type";
  message: string;
}

// eslint-disable-next-line no-control-regex
const BAD_CHARS = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function badString(s: string): Unstorable["reason"] | undefined {
  const m = BAD_CHARS.exec(s);
  if (!m) return undefined;
  return m[0] === "\u0000" ? "nul_character" : "lone_surrogate";
}

const WHY: Record<Unstorable["reason"], string> = {
  nul_character: "contains the NUL character (\\u0000), which Postgres text/jsonb cannot store",
  lone_surrogate: "contains a lone UTF-16 surrogate (not valid Unicode), which Postgres jsonb cannot store",
  bigint: "is a bigint, which JSON cannot represent (send it as a string)",
  non_finite_number: "is NaN or Infinity, which JSON cannot represent",
  too_deep: `is nested deeper than ${MAX_VALUE_DEPTH} levels`,
  proto_key: 'uses "__proto__" as a key, which JavaScript reads as the prototype (the value would be lost)',
  unsupported_type: "is not a JSON value",
};

const seg = (k: string | number) =>
  typeof k === "number"
    ? String(k)
    : k.length > 40
      ? `${JSON.stringify(k.slice(0, 40)).slice(0, -1)}…"`
      : /^[A-Za-z0-9_$-]+$/.test(k)
        ? k
        : JSON.stringify(k);

/** The first part of `value` that cannot be stored, or undefined. Iterative (no stack overflow on hostile depth). */
export function findUnstorable(value: unknown, field: string): Unstorable | undefined {
  // a part's path is built only when that part is refused: a clean value costs no strings
  const stack: Part[] = [{ v: value, up: undefined, key: undefined, depth: 0 }];
  const out = (p: Part | string, reason: Unstorable["reason"]): Unstorable => {
    const path = typeof p === "string" ? p : pathOf(p, field);
    return { path, reason, message: `${path}: ${WHY[reason]}` };
  };
  while (stack.length) {
    const part = stack.pop()!;
    const { v, depth } = part;
    switch (typeof v) {
      case "string": {
        const r = badString(v);
        if (r) return out(part, r);
        continue;
      }
      case "number":
        if (!Number.isFinite(v)) return out(part, "non_finite_number");
        continue;
      case "bigint":
        return out(part, "bigint");
      case "symbol":
        return out(part, "unsupported_type");
      case "object": {
        if (v === null) continue;
        if (depth >= MAX_VALUE_DEPTH) return out(part, "too_deep");
        if (Array.isArray(v)) {
          for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i], up: part, key: i, depth: depth + 1 });
          continue;
        }
        if (v instanceof Date) continue; // JSON.stringify writes an ISO string
        const keys = Object.keys(v);
        for (let i = keys.length - 1; i >= 0; i--) {
          const k = keys[i]!;
          const kr = k === "__proto__" ? "proto_key" : badString(k);
          if (kr) return out(`${pathOf(part, field)}.${seg(k)}`, kr);
          stack.push({ v: (v as Record<string, unknown>)[k], up: part, key: k, depth: depth + 1 });
        }
        continue;
      }
      default:
        continue; // undefined and functions: dropped by JSON, as everywhere
    }
  }
  return undefined;
}

interface Part {
  v: unknown;
  up: Part | undefined;
  /** Its index in an array or key in an object (undefined: the value itself). */
  key: string | number | undefined;
  depth: number;
}

function pathOf(p: Part, field: string): string {
  const keys: (string | number)[] = [];
  for (let q: Part | undefined = p; q && q.key !== undefined; q = q.up) keys.push(q.key);
  let path = field;
  for (let i = keys.length - 1; i >= 0; i--) {
    const k = keys[i]!;
    path += typeof k === "number" ? `.${k}` : `.${seg(k)}`;
  }
  return path;
}

/**
 * Make a string storable, visibly: NUL becomes the six characters `\u0000`, a lone surrogate
 * U+FFFD. For diagnostic text (error messages) only, never for data.
 */
export function storableText(s: string): string {
  if (!BAD_CHARS.test(s)) return s;
  // eslint-disable-next-line no-control-regex
  return s
    .replace(/\u0000/g, "\\u0000")
    .replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");
}
