/**
 * graphs/changes-only.ts drops a node's writes that leave their channel as it is. Checked against
 * LangGraph's own channels for the run state (graphs/state.ts, their real reducers): for generated
 * states and updates, every channel holds the same value after the reduced update as after the
 * whole one, and what is dropped is exactly what the rules allow.
 */
import { fc, test } from "@fast-check/vitest";
import { describe, expect } from "vitest";
import { changesOnly } from "../graphs/changes-only.js";
import { APPENDED_CHANNELS, MERGED_CHANNELS, RunStateAnnotation, type RunState } from "../graphs/state.js";

type Channel = {
  fromCheckpoint(v: unknown): Channel;
  update(values: unknown[]): boolean;
  get(): unknown;
};
import { LastValue } from "@langchain/langgraph/channels";

// a channel without a reducer is declared by a bare `Annotation` (a function): LangGraph makes it a LastValue
const spec = Object.fromEntries(
  Object.entries(RunStateAnnotation.spec as Record<string, unknown>).map(([k, s]) => [
    k,
    (typeof s === "function" ? new LastValue() : s) as unknown as Channel,
  ]),
);
const names = Object.keys(spec);
const merged = new Set<string>(MERGED_CHANNELS);
const appended = new Set<string>(APPENDED_CHANNELS);

const leaf = fc.oneof(fc.integer({ min: 0, max: 3 }), fc.constantFrom("a", "b", null, true), fc.constant(undefined));
const record = fc.dictionary(fc.constantFrom("x", "y", "z"), fc.oneof(leaf, fc.record({ v: leaf })), { maxKeys: 3 });
const list = fc.array(fc.constantFrom("s1", "s2", "s3"), { maxLength: 3 });

/** A channel's value: records for merged channels, lists for appended ones, anything for the rest. */
const valueFor = (name: string) =>
  merged.has(name) ? record : appended.has(name) ? list : fc.oneof(leaf, record, list, fc.record({ goal: leaf }));

const stateArb = fc.record(Object.fromEntries(names.map((n) => [n, valueFor(n)]))) as fc.Arbitrary<
  Record<string, unknown>
>;

/** What a node writes to a channel: the value it holds (by identity), an equal copy, an empty one, something new. */
const writeFor = (name: string, held: unknown) =>
  fc.oneof(
    fc.constant(held),
    fc.constant(held === undefined ? undefined : structuredClone(held)),
    fc.constant(merged.has(name) ? {} : appended.has(name) ? [] : undefined),
    valueFor(name),
  );

// a node sees its channels' values (a channel with a default holds it before any write)
const caseArb = stateArb
  .map((raw) => apply(raw, {}))
  .chain((state) =>
    fc
      .subarray(names, { minLength: 0 })
      .chain((keys) => fc.tuple(...keys.map((k) => writeFor(k, state[k]))).map((vs) => ({ keys, vs })))
      .map(({ keys, vs }) => ({ state, update: Object.fromEntries(keys.map((k, i) => [k, vs[i]])) })),
  );

/** The channels after a superstep in which one node wrote `update` (LangGraph writes every key it returns). */
function apply(state: Record<string, unknown>, update: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const n of names) {
    const ch = spec[n]!.fromCheckpoint(state[n]);
    if (n in update) ch.update([update[n]]);
    let v: unknown;
    try {
      v = ch.get();
    } catch {
      v = undefined; // an empty channel
    }
    out[n] = v;
  }
  return out;
}

describe("a node's update reduced to its changes (graphs/changes-only.ts)", () => {
  test.prop([caseArb], { numRuns: 2_000 })("leaves every channel as the whole update would", ({ state, update }) => {
    const reduced = changesOnly(state as unknown as RunState, update);
    expect(apply(state, reduced)).toEqual(apply(state, update));
    // nothing is added or changed, and each drop is one the rules allow
    for (const [k, v] of Object.entries(reduced)) expect(v).toBe(update[k]);
    for (const k of Object.keys(update).filter((k) => !(k in reduced))) {
      const v = update[k];
      if (merged.has(k)) expect(v).toEqual({});
      else if (appended.has(k)) expect(v).toEqual([]);
      else expect(Object.is(v, state[k])).toBe(true);
    }
    // and each such write is dropped (the update is as small as the rules make it)
    for (const k of Object.keys(reduced)) {
      const v = update[k];
      const droppable = merged.has(k)
        ? v !== null && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length === 0
        : appended.has(k)
          ? Array.isArray(v) && v.length === 0
          : Object.is(v, state[k]);
      expect(droppable).toBe(false);
    }
  });

  test.prop([caseArb])("an identical non-empty list appended is kept: it appends again", ({ state }) => {
    const held = state.completionOrder as string[];
    fc.pre(held.length > 0);
    const reduced = changesOnly(state as unknown as RunState, { completionOrder: held });
    expect(reduced).toEqual({ completionOrder: held });
    expect(apply(state, reduced).completionOrder).toEqual([...held, ...held]);
  });

  test.prop([caseArb])("an update unchanged in every channel returns the same object", ({ state, update }) => {
    const fresh = Object.fromEntries(Object.keys(update).map((k) => [k, { fresh: k }]));
    const kept = Object.fromEntries(Object.keys(update).map((k) => [k, fresh[k]]));
    expect(changesOnly(state as unknown as RunState, kept)).toBe(kept);
  });
});
