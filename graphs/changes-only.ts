/**
 * A node's update, reduced to what it changes. Nodes return whole records (`...facts`, `status`,
 * `updatedAt`, the plan they accepted), and LangGraph stores a new blob and a write row for every
 * channel a node writes, changed or not: a trivial run wrote 22 channel values where 15 changed.
 * Dropping a write is sound only where it cannot change the channel's value:
 * - a last-value channel (no reducer, `(a, b) => b`, `(a, b) => b ?? a`) written with the very
 *   value it holds (Object.is: the same primitive or the same object, never a deep compare);
 * - a merged record (`{ ...a, ...b }`) written with `{}`;
 * - an appended list (`a.concat(b)`) written with `[]`, never an identical non-empty list, which
 *   appends again (the property test against LangGraph's own channels found exactly that).
 * It relies on one node per superstep (graphs/toolchain.ts: every edge has one destination), so
 * no other writer of the same superstep could have been overridden by the dropped write.
 */
import { APPENDED_CHANNELS, MERGED_CHANNELS, type RunState } from "./state.js";

const MERGED: ReadonlySet<string> = new Set(MERGED_CHANNELS);
const APPENDED: ReadonlySet<string> = new Set(APPENDED_CHANNELS);

/** The update without the writes that would leave their channel as it is in `state`. */
export function changesOnly<U>(state: RunState, update: U): U {
  if (update === null || typeof update !== "object" || Array.isArray(update)) return update;
  // only a plain update object: a Command or anything else LangGraph interprets passes as it is
  const proto = Object.getPrototypeOf(update);
  if (proto !== Object.prototype && proto !== null) return update;
  const held = state as unknown as Record<string, unknown>;
  let out: Record<string, unknown> | undefined;
  for (const [k, v] of Object.entries(update as Record<string, unknown>)) {
    if (!unchanged(k, v, held[k])) continue;
    out ??= { ...(update as Record<string, unknown>) };
    delete out[k];
  }
  return (out ?? update) as U;
}

function unchanged(channel: string, value: unknown, held: unknown): boolean {
  if (MERGED.has(channel)) return isEmptyRecord(value);
  if (APPENDED.has(channel)) return Array.isArray(value) && value.length === 0;
  return Object.is(value, held);
}

function isEmptyRecord(v: unknown): boolean {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return false;
  for (const _ in v) return false;
  return true;
}
