/**
 * Argument references: `{ "$ref": "context.table.id" }`, `{ "$ref": "steps.split.tasks.0.title" }`,
 * `{ "$ref": "memory.gantt" }`, at any depth of a step's arguments. `{ "$literal": x }` passes x
 * through untouched (so a literal object may contain a "$ref" key). Pure functions only.
 */
import { ErrorCode, ToolchainError } from "../kernel/errors.js";

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
export function readPath(root: unknown, path: readonly string[]): { found: true; value: unknown } | { found: false; missingAt: number } {
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
  if (ref.root === "self" && !scope.self) throw refError(`${ref.at}: $ref "${ref.raw}": self.… is only available in rollback arguments`);
  const base = ref.root === "context" ? scope.context : ref.root === "memory" ? scope.memory : ref.root === "self" ? scope.self : scope.steps;
  if (ref.root === "steps" && !Object.prototype.hasOwnProperty.call(scope.steps, ref.path[0]!)) {
    throw refError(`${ref.at}: $ref "${ref.raw}": step "${ref.path[0]}" has no output`, { ref: ref.raw });
  }
  const r = readPath(base, ref.path);
  if (!r.found) {
    const prefix = [ref.root, ...ref.path.slice(0, r.missingAt + 1)].join(".");
    throw refError(`${ref.at}: $ref "${ref.raw}" does not resolve: "${prefix}" is missing`, { ref: ref.raw, missing: prefix });
  }
  return r.value;
}

/** A deep copy of `value` with every reference replaced by its value and every $literal unwrapped. */
export function resolveArguments<T>(value: T, scope: RefScope, at = "arguments"): T {
  const walk = (v: unknown, where: string): unknown => {
    if (isRef(v)) return structuredClone(resolveRef(parseRef(v.$ref, where), scope));
    if (isLiteral(v)) return structuredClone(v.$literal);
    if (Array.isArray(v)) return v.map((x, i) => walk(x, `${where}.${i}`));
    if (v && typeof v === "object") {
      const o: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        if (FORBIDDEN.has(k)) throw refError(`${where}: key "${k}" is not allowed in arguments`);
        o[k] = walk(x, `${where}.${k}`);
      }
      return o;
    }
    return v;
  };
  return walk(value, at) as T;
}
