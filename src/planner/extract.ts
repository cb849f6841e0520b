/**
 * Reading a JSON object out of what a model wrote. Real models wrap the object in prose ("Here is
 * the plan: {…} Let me know…"), in a Markdown fence, or double-encode tool-call arguments as a
 * JSON string. Pure; an unreadable answer yields the parse error, which the planner hands to the
 * repair round instead of falling back silently.
 */

export type Extracted = { ok: true; value: unknown } | { ok: false; error: string };

const MAX_CANDIDATES = 50;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function tryParse(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return { ok: false, error: (e as Error).message };
  }
}

/** The end (exclusive) of the balanced `{…}` starting at `start`, skipping braces inside strings. */
function balancedEnd(text: string, start: number): number | undefined {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{") depth++;
    else if (c === "}" && --depth === 0) return i + 1;
  }
  return undefined;
}

/**
 * The JSON object in `text`: the whole text, else a fenced block, else an object embedded in prose
 * (the first that `prefer` likes, else the largest). `prefer` tells a plan from other objects.
 */
export function extractJsonObject(
  text: string,
  prefer: (v: Record<string, unknown>) => boolean = () => true,
): Extracted {
  const body = text.trim();
  if (!body) return { ok: false, error: "the answer is empty" };
  const whole = tryParse(body);
  if (whole.ok) {
    if (typeof whole.value === "string") return extractJsonObject(whole.value, prefer); // double-encoded
    if (isObject(whole.value)) return whole;
    return {
      ok: false,
      error: `the answer is JSON but not an object (${Array.isArray(whole.value) ? "an array" : typeof whole.value})`,
    };
  }
  const candidates: Record<string, unknown>[] = [];
  let firstError: string | undefined;
  for (const m of body.matchAll(/```[A-Za-z0-9_-]*[ \t]*\r?\n?([\s\S]*?)```/g)) {
    const r = tryParse(m[1]!.trim());
    if (r.ok && isObject(r.value)) candidates.push(r.value);
    else if (!r.ok) firstError ??= `fenced block: ${r.error}`;
  }
  if (!candidates.length) {
    let attempts = 0;
    for (let i = body.indexOf("{"); i >= 0 && attempts < MAX_CANDIDATES; attempts++) {
      const end = balancedEnd(body, i);
      if (end === undefined) {
        firstError ??= `an object starting at character ${i} is never closed (a truncated answer?)`;
        break;
      }
      const r = tryParse(body.slice(i, end));
      if (r.ok && isObject(r.value)) {
        candidates.push(r.value);
        i = body.indexOf("{", end);
      } else {
        if (!r.ok) firstError ??= r.error;
        i = body.indexOf("{", i + 1);
      }
    }
  }
  const liked = candidates.find(prefer);
  if (liked) return { ok: true, value: liked };
  if (candidates.length) {
    const sized = candidates.map((c) => [JSON.stringify(c).length, c] as const).sort((a, b) => b[0] - a[0]);
    return { ok: true, value: sized[0]![1] };
  }
  return {
    ok: false,
    error: `no JSON object found in the answer (${firstError ?? whole.error}); it starts with ${JSON.stringify(body.slice(0, 120))}`,
  };
}

/** A plan-shaped object: has a `steps` array. */
export const looksLikePlan = (v: Record<string, unknown>): boolean => Array.isArray(v.steps);

/**
 * Tool-call arguments as parsed by the client: unwrap a double-encoded string and a single
 * wrapper key (`{"plan": {...}}`) when the object inside is what `prefer` wants.
 */
export function unwrapArguments(args: unknown, prefer: (v: Record<string, unknown>) => boolean): Extracted {
  if (typeof args === "string") return extractJsonObject(args, prefer);
  if (!isObject(args)) return { ok: false, error: "the tool call's arguments are not an object" };
  if (prefer(args)) return { ok: true, value: args };
  const keys = Object.keys(args);
  if (keys.length === 1) {
    const inner = args[keys[0]!];
    const unwrapped =
      typeof inner === "string"
        ? extractJsonObject(inner, prefer)
        : isObject(inner)
          ? { ok: true as const, value: inner }
          : undefined;
    if (unwrapped?.ok && isObject(unwrapped.value) && prefer(unwrapped.value)) return unwrapped;
  }
  return { ok: true, value: args };
}
