/** The remembered ISO timestamp (src/kernel/iso-time.ts) is always the Date's own text for that millisecond. */
import fc from "fast-check";
import { expect, test } from "vitest";
import { isoAt } from "../src/kernel/iso-time.js";

test("isoAt(ms) equals new Date(ms).toISOString() for any sequence of times, repeated or not", () => {
  const ms = fc.integer({ min: -8.64e15, max: 8.64e15 });
  fc.assert(
    fc.property(fc.array(fc.oneof(ms, fc.constantFrom(0, 1, 1_700_000_000_000)), { maxLength: 30 }), (times) => {
      for (const t of times) expect(isoAt(t)).toBe(new Date(t).toISOString());
    }),
  );
});
