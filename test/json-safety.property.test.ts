/**
 * findUnstorable names the part it refuses: over arbitrary JSON values with one unstorable leaf
 * put at a random place, the path it reports is the path of that place (built independently
 * here), and a clean value is never refused. The walk builds a path only for the refused part.
 */
import { fc, test } from "@fast-check/vitest";
import { expect } from "vitest";
import { findUnstorable } from "../src/kernel/json-safety.js";

const seg = (k: string) =>
  k.length > 40
    ? `${JSON.stringify(k.slice(0, 40)).slice(0, -1)}…"`
    : /^[A-Za-z0-9_$-]+$/.test(k)
      ? k
      : JSON.stringify(k);

// keys that are storable themselves (no NUL, no lone surrogate, not __proto__)
const key = fc.string({ maxLength: 45 }).filter((k) => k !== "__proto__" && !k.includes("\u0000"));
// an own "__proto__" key is refused by design (see src/kernel/json-safety.ts), so a clean value has none
const hasProtoKey = (v: unknown): boolean =>
  v !== null &&
  typeof v === "object" &&
  (Array.isArray(v)
    ? v.some(hasProtoKey)
    : Object.keys(v).some((k) => k === "__proto__") || Object.values(v).some(hasProtoKey));
const clean = fc
  .jsonValue({ maxDepth: 4 })
  .map((v) => JSON.parse(JSON.stringify(v)) as unknown)
  .filter((v) => !hasProtoKey(v));
const bad = fc.constantFrom<unknown>("a\u0000b", "x\ud800", Number.NaN, 10n, Infinity);

/** Puts `leaf` into `value` along `route` (creating containers where needed); returns the value and the path. */
function plant(value: unknown, route: (string | number)[], leaf: unknown): { value: unknown; path: string } {
  const root: { v: unknown } = { v: value };
  let holder: Record<string | number, unknown> = root as never;
  let slot: string | number = "v";
  let path = "output";
  for (const step of route) {
    let here = holder[slot];
    if (typeof step === "number") {
      if (!Array.isArray(here)) holder[slot] = here = [];
      const arr = here as unknown[];
      const i = Math.min(step, arr.length);
      if (i === arr.length) arr.push(null);
      holder = arr as never;
      slot = i;
      path += `.${i}`;
    } else {
      if (here === null || typeof here !== "object" || Array.isArray(here)) holder[slot] = here = {};
      holder = here as never;
      slot = step;
      path += `.${seg(step)}`;
    }
  }
  holder[slot] = leaf;
  return { value: root.v, path };
}

test.prop([clean])("a clean JSON value is storable", (v) => {
  expect(findUnstorable(v, "output")).toBeUndefined();
});

test.prop([clean, fc.array(fc.oneof(key, fc.nat({ max: 5 })), { maxLength: 6 }), bad])(
  "the refused path is where the unstorable leaf is",
  (v, route, leaf) => {
    const planted = plant(structuredClone(v), route, leaf);
    const found = findUnstorable(planted.value, "output");
    expect(found?.path).toBe(planted.path);
    expect(found?.message.startsWith(`${planted.path}: `)).toBe(true);
  },
);

test.prop([fc.string({ maxLength: 45 })])("a refused key is named after its container", (k) => {
  const found = findUnstorable({ a: [{ [`${k}\u0000`]: 1 }] }, "output");
  expect(found?.reason).toBe("nul_character");
  expect(found?.path).toBe(`output.a.0.${seg(`${k}\u0000`)}`);
});
