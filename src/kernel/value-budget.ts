/**
 * One byte budget for every value a run makes and keeps: a step's resolved arguments, its output
 * or preview, and so what events and checkpoints carry of them. `TOOLCHAIN_MAX_VALUE_BYTES`
 * (default 4 MiB). A few references can name one large value many times (`$ref` fan-out): 130 KB
 * of plan can resolve to 100 MB, so the size is counted while values are made (src/plan/refs.ts)
 * and the work stops at the budget, never measured after the fact.
 *
 * Sizes are JSON bytes, counted without serializing: UTF-8 string bytes (escapes not expanded)
 * plus quotes, separators and keys. Close enough for a budget, and it stops early.
 */
import { ErrorCode, ToolchainError } from "./errors.js";

export const DEFAULT_MAX_VALUE_BYTES = 4 * 1024 * 1024;
const MIN = 1_024;
const MAX = 2 ** 31 - 1;

let fromProcess: number | undefined;

/**
 * The configured budget: `env`'s, or without it the process's, read once (a value is sized several
 * times per step, and each read of `process.env` is a call into the C++ environment). Throws a
 * TypeError naming the variable when it is not an integer in range.
 */
export function maxValueBytes(env?: NodeJS.ProcessEnv): number {
  if (env === undefined) return (fromProcess ??= parseBudget(process.env));
  return parseBudget(env);
}

function parseBudget(env: NodeJS.ProcessEnv): number {
  const raw = env.TOOLCHAIN_MAX_VALUE_BYTES;
  const bytes = raw === undefined || raw === "" ? DEFAULT_MAX_VALUE_BYTES : Number(raw);
  if (!Number.isInteger(bytes) || bytes < MIN || bytes > MAX) {
    throw new TypeError(`Expected TOOLCHAIN_MAX_VALUE_BYTES to be an integer from ${MIN} to ${MAX}, got "${raw}"`);
  }
  return bytes;
}

/**
 * The JSON size of `value` in bytes, or `limit + 1` as soon as it is known to exceed `limit`
 * (the walk stops there). Iterative: hostile depth cannot overflow the stack.
 */
export function jsonBytes(value: unknown, limit = Number.MAX_SAFE_INTEGER): number {
  let total = 0;
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    switch (typeof v) {
      case "string":
        // a string has at least as many UTF-8 bytes as UTF-16 units: a long one is over without a count
        total += (v.length > limit ? v.length : Buffer.byteLength(v)) + 2;
        break;
      case "number":
        total += v.toString().length;
        break;
      case "boolean":
        total += v ? 4 : 5;
        break;
      case "object":
        if (v === null) total += 4;
        else if (Array.isArray(v)) {
          total += 2 + Math.max(0, v.length - 1);
          for (let i = v.length - 1; i >= 0; i--) stack.push(v[i]);
        } else if (v instanceof Date) total += 26;
        else {
          const keys = Object.keys(v);
          total += 2 + Math.max(0, keys.length - 1);
          for (const k of keys) {
            total += Buffer.byteLength(k) + 3;
            stack.push((v as Record<string, unknown>)[k]);
          }
        }
        break;
      default:
        break; // undefined, functions: dropped by JSON
    }
    if (total > limit) return limit + 1;
  }
  return total;
}

const human = (n: number) =>
  n >= 1_048_576
    ? `${(n / 1_048_576).toFixed(n % 1_048_576 ? 1 : 0)} MiB`
    : n >= 1024
      ? `${Math.round(n / 1024)} KiB`
      : `${n} bytes`;

/** VALUE_TOO_LARGE naming the field (and the step, when known). */
export function valueTooLarge(
  field: string,
  limit: number,
  o: { stepId?: string; what?: string } = {},
): ToolchainError {
  const who = o.stepId !== undefined ? `step "${o.stepId}": ` : "";
  return new ToolchainError(
    ErrorCode.VALUE_TOO_LARGE,
    `${who}${field}: ${o.what ?? "the value is"} larger than the value budget of ${human(limit)} (TOOLCHAIN_MAX_VALUE_BYTES)`,
    {
      details: { ...(o.stepId !== undefined ? { stepId: o.stepId } : {}), field, limit },
    },
  );
}
