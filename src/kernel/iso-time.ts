/**
 * A timestamp as ISO 8601 text, remembered for the millisecond it names: a step stamps its record
 * and its events several times within one millisecond, and formatting a Date is the costly part.
 */
let lastMs = Number.NaN;
let lastIso = "";

export function isoAt(ms: number): string {
  if (ms !== lastMs) {
    lastIso = new Date(ms).toISOString();
    lastMs = ms;
  }
  return lastIso;
}
