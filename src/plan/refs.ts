/**
 * Argument references: `{ "$ref": "context.table.id" }`, `{ "$ref": "steps.split.tasks.0.title" }`,
 * `{ "$ref": "memory.gantt" }`, at any depth of a step's arguments. `{ "$literal": x }` passes x
 * through untouched (so a literal object may contain a "$ref" key). Pure functions only.
 */
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { jsonBytes, maxValueBytes, valueTooLarge } from "../kernel/value-budget.js";

/** `self` (the step's own `input` and `output`) is only meaningful in rollback arguments. */
export type RefRoot = "context" | "steps" | "memory" | "self";
export interface ParsedRef {
  raw: string;
  root: RefRoot;
  /** Path below the root; for `steps`, path[0] is the step id. */
  path: string[];
  /** Where in the arguments it was found, e.g. "arguments.rows.0.title". */
  at: string;
}

const FORBIDDEN = new Set(["__proto__", "constructor", "prototype"]);
const ROOTS = new Set<string>(["context", "steps", "memory", "self"]);

export function isRef(v: unknown): v is { $ref: string } {
  return typeof v === "object" && v !== null && !Array.isArray(v) && Object.keys(v).length === 1 && "$ref" in v;
}
function isLiteral(v: unknown): v is { $literal: unknown } {
  return typeof v === "object" && v !== null && !Array.isArray(v) && Object.keys(v).length === 1 && "$literal" in v;
}

function refError(message: string, details?: unknown): ToolchainError {
  return new ToolchainError(ErrorCode.INVALID_REFERENCE, message, { details });
}

export function parseRef(raw: unknown, at: string): ParsedRef {
  if (typeof raw !== "string" || raw.length === 0) throw refError(`${at}: $ref must be a non-empty string`);
  const parts = raw.split(".");
  const [root, ...path] = parts;
  if (!root || !ROOTS.has(root)) {
    throw refError(`${at}: $ref "${raw}" must start with context., steps. or memory.`);
  }
  if (root === "self" && path[0] !== "input" && path[0] !== "output") {
    throw refError(`${at}: $ref "${raw}" must be self.input… or self.output…`);
  }
  for (const seg of path) {
    if (seg === "") throw refError(`${at}: $ref "${raw}" has an empty path segment`);
    if (FORBIDDEN.has(seg)) throw refError(`${at}: $ref "${raw}" uses the forbidden segment "${seg}"`);
  }
  if (root === "steps" && path.length === 0) throw refError(`${at}: $ref "${raw}" must name a step`);
  if (root === "memory" && path.length === 0) throw refError(`${at}: $ref "${raw}" must name a memory key`);
  return { raw, root: root as RefRoot, path, at };
}

/** Every reference in a value, with where it sits. Throws INVALID_REFERENCE on malformed ones. */
export function collectRefs(value: unknown, at = "arguments"): ParsedRef[] {
  const out: ParsedRef[] = [];
  const walk = (v: unknown, where: string): void => {
    if (isRef(v)) {
      out.push(parseRef(v.$ref, where));
      return;
    }
    if (isLiteral(v)) return;
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${where}.${i}`));
    else if (v && typeof v === "object") for (const [k, x] of Object.entries(v)) walk(x, `${where}.${k}`);
  };
  walk(value, at);
  return out;
}

/** Read a path with own-property lookups only (no prototype walk). */
export function readPath(
  root: unknown,
  path: readonly string[],
): { found: true; value: unknown } | { found: false; missingAt: number } {
  let cur: unknown = root;
  for (let i = 0; i < path.length; i++) {
    const seg = path[i]!;
    if (cur === null || typeof cur !== "object") return { found: false, missingAt: i };
    if (Array.isArray(cur)) {
      if (!/^(0|[1-9]\d*)$/.test(seg)) return { found: false, missingAt: i };
      const idx = Number(seg);
      if (idx >= cur.length) return { found: false, missingAt: i };
      cur = cur[idx];
    } else {
      if (!Object.prototype.hasOwnProperty.call(cur, seg)) return { found: false, missingAt: i };
      cur = (cur as Record<string, unknown>)[seg];
    }
  }
  return { found: true, value: cur };
}

export interface RefScope {
  context: unknown;
  memory: Record<string, unknown>;
  /** Outputs of completed steps, by stepId. */
  steps: Record<string, unknown>;
  /** Rollback arguments only: the compensated step's own input and output. */
  self?: { input: unknown; output: unknown };
}

export function resolveRef(ref: ParsedRef, scope: RefScope): unknown {
  if (ref.root === "self" && !scope.self)
    throw refError(`${ref.at}: $ref "${ref.raw}": self.… is only available in rollback arguments`);
  const base =
    ref.root === "context"
      ? scope.context
      : ref.root === "memory"
        ? scope.memory
        : ref.root === "self"
          ? scope.self
          : scope.steps;
  if (ref.root === "steps" && !Object.prototype.hasOwnProperty.call(scope.steps, ref.path[0]!)) {
    throw refError(`${ref.at}: $ref "${ref.raw}": step "${ref.path[0]}" has no output`, { ref: ref.raw });
  }
  const r = readPath(base, ref.path);
  if (!r.found) {
    const prefix = [ref.root, ...ref.path.slice(0, r.missingAt + 1)].join(".");
    throw refError(`${ref.at}: $ref "${ref.raw}" does not resolve: "${prefix}" is missing`, {
      ref: ref.raw,
      missing: prefix,
    });
  }
  return r.value;
}

export interface ResolveBudget {
  /** Most JSON bytes the resolved value may have. @default maxValueBytes() (TOOLCHAIN_MAX_VALUE_BYTES, 4 MiB) */
  maxBytes?: number;
  /** Named in the VALUE_TOO_LARGE message. */
  stepId?: string;
}

/**
 * A deep copy of `value` with every reference replaced by its value and every $literal unwrapped.
 * The copy's size is counted as it is made: each referenced value is measured (once, however
 * often it is named) before it is copied, and the first reference that would take the copy over
 * the budget stops the work with VALUE_TOO_LARGE naming where it sits. So 1,000 references to one
 * 100 KB output cost about the budget's worth of work, not 100 MB.
 */
export function resolveArguments<T>(value: T, scope: RefScope, at = "arguments", budget: ResolveBudget = {}): T {
  const limit = budget.maxBytes ?? maxValueBytes();
  let used = 0;
  const measured = new Map<object, number>();
  const charge = (bytes: number, where: string) => {
    used += bytes;
    if (used > limit) throw valueTooLarge(where, limit, { stepId: budget.stepId, what: "the resolved arguments are" });
  };
  const sizeOf = (v: unknown): number => {
    if (v === null || typeof v !== "object") return jsonBytes(v, limit - used);
    const known = measured.get(v);
    if (known !== undefined) return known;
    const n = jsonBytes(v, limit - used);
    if (n <= limit - used) measured.set(v, n); // a cut-off count is not the size: never remembered
    return n;
  };
  const walk = (v: unknown, where: string): unknown => {
    if (isRef(v)) {
      const resolved = resolveRef(parseRef(v.$ref, where), scope);
      charge(sizeOf(resolved), where);
      return structuredClone(resolved);
    }
    if (isLiteral(v)) {
      charge(sizeOf(v.$literal), where);
      return structuredClone(v.$literal);
    }
    if (Array.isArray(v)) {
      charge(2 + Math.max(0, v.length - 1), where);
      return v.map((x, i) => walk(x, `${where}.${i}`));
    }
    if (v && typeof v === "object") {
      const o: Record<string, unknown> = {};
      const entries = Object.entries(v);
      charge(2 + Math.max(0, entries.length - 1), where);
      for (const [k, x] of entries) {
        if (FORBIDDEN.has(k)) throw refError(`${where}: key "${k}" is not allowed in arguments`);
        const at = `${where}.${k}`;
        charge(Buffer.byteLength(k) + 3, at);
        o[k] = walk(x, at);
      }
      return o;
    }
    charge(jsonBytes(v, limit - used), where);
    return v;
  };
  return walk(value, at) as T;
}

/**
 * A lower bound of the resolved size of `value`, known before anything runs: its literal parts
 * and the context and memory values its references name (when given), each counted as often as it
 * is named; a step's output counts nothing (unknown yet). Stops at `limit + 1`. Validation refuses
 * a step whose bound is over the budget: it could only fail at run time.
 */
export function staticArgumentBytes(
  value: unknown,
  known: { context?: unknown; memory?: Record<string, unknown> },
  limit: number,
): number {
  let used = 0;
  const measured = new Map<object, number>();
  const stack: unknown[] = [value];
  while (stack.length && used <= limit) {
    const v = stack.pop();
    if (isRef(v)) {
      if (typeof v.$ref !== "string") continue;
      const [root, ...path] = v.$ref.split(".");
      const base = root === "context" ? known.context : root === "memory" ? known.memory : undefined;
      if (base === undefined) continue;
      const r = readPath(base, path);
      if (!r.found) continue;
      const x = r.value;
      let n = x !== null && typeof x === "object" ? measured.get(x) : undefined;
      if (n === undefined) {
        n = jsonBytes(x, limit - used);
        if (x !== null && typeof x === "object" && n <= limit - used) measured.set(x, n);
      }
      used += n;
    } else if (isLiteral(v)) used += jsonBytes(v.$literal, limit - used);
    else if (Array.isArray(v)) {
      used += 2 + Math.max(0, v.length - 1);
      for (let i = v.length - 1; i >= 0; i--) stack.push(v[i]);
    } else if (v && typeof v === "object") {
      const keys = Object.keys(v);
      used += 2 + Math.max(0, keys.length - 1);
      for (const k of keys) {
        used += Buffer.byteLength(k) + 3;
        stack.push((v as Record<string, unknown>)[k]);
      }
    } else used += jsonBytes(v, limit - used);
  }
  return used > limit ? limit + 1 : used;
}
