/**
 * Property-based tests for `topoSort` (src/plan/validate.ts): an order that respects every edge for
 * a DAG, and a real cycle (in execution direction, first === last) when one is added.
 */
import { fc, test } from "@fast-check/vitest";
import { describe, expect, it } from "vitest";
import { topoSort } from "../src/plan/topo.js";

interface Graph {
  /** Declaration order. */
  ids: string[];
  /** id -> the ids it depends on */
  deps: Map<string, string[]>;
  /** rank[id]: a hidden topological rank; every edge goes from a lower to a higher rank */
  rank: Map<string, number>;
}

/**
 * A random DAG: nodes get a hidden rank 0..n-1, edges only go from lower to higher rank (so it is
 * acyclic), and the declaration order is an independent random permutation.
 */
const dagArb = (opts: { maxN?: number; dupDeps?: boolean } = {}): fc.Arbitrary<Graph> =>
  fc.integer({ min: 1, max: opts.maxN ?? 60 }).chain((n) =>
    fc
      .record({
        names: fc.uniqueArray(fc.string({ minLength: 1, maxLength: 6 }), { minLength: n, maxLength: n }),
        declKeys: fc.array(fc.nat(), { minLength: n, maxLength: n }),
        deps: fc.tuple(
          ...Array.from({ length: n }, (_, r) =>
            r === 0
              ? fc.constant<number[]>([])
              : fc.uniqueArray(fc.integer({ min: 0, max: r - 1 }), { maxLength: Math.min(r, 4) }),
          ),
        ),
        dup: opts.dupDeps ? fc.array(fc.boolean(), { minLength: n, maxLength: n }) : fc.constant(undefined),
      })
      .map(({ names, declKeys, deps, dup }) => {
        const rank = new Map(names.map((id, r) => [id, r]));
        const depMap = new Map<string, string[]>();
        names.forEach((id, r) => {
          const ds = deps[r]!.map((d) => names[d]!);
          // a repeated dependency must not confuse the in-degree count
          if (dup?.[r] && ds.length) ds.push(ds[0]!);
          depMap.set(id, ds);
        });
        const ids = names
          .map((_, r) => r)
          .sort((a, b) => declKeys[a]! - declKeys[b]! || a - b)
          .map((r) => names[r]!);
        return { ids, deps: depMap, rank };
      }),
  );

function edges(g: Graph): [string, string][] {
  const out: [string, string][] = [];
  for (const [id, ds] of g.deps) for (const d of ds) out.push([d, id]);
  return out;
}

function reachable(deps: Map<string, string[]>, from: string, to: string): boolean {
  // is `to` a (transitive) dependent of `from`? walk dependencies backwards from `to`
  const seen = new Set<string>();
  const stack = [to];
  while (stack.length) {
    const x = stack.pop()!;
    if (x === from) return true;
    if (seen.has(x)) continue;
    seen.add(x);
    stack.push(...(deps.get(x) ?? []));
  }
  return false;
}

function expectRealCycle(cycle: string[], ids: readonly string[], deps: Map<string, string[]>): void {
  expect(cycle.length).toBeGreaterThanOrEqual(2);
  expect(cycle[0]).toBe(cycle[cycle.length - 1]);
  const inner = cycle.slice(0, -1);
  expect(new Set(inner).size).toBe(inner.length); // a simple cycle
  for (const id of inner) expect(ids).toContain(id);
  for (let i = 0; i + 1 < cycle.length; i++) {
    const x = cycle[i]!;
    const y = cycle[i + 1]!;
    // execution direction: y depends on x
    expect(deps.get(y) ?? [], `${x} -> ${y} is not an edge`).toContain(x);
  }
  // it starts at the step declared first, so the message is stable
  const declared = (id: string) => ids.indexOf(id);
  for (const id of inner) expect(declared(cycle[0]!)).toBeLessThanOrEqual(declared(id));
}

describe("topoSort (property-based)", () => {
  test.prop([dagArb({ dupDeps: true })], { numRuns: 300 })(
    "a DAG sorts: the order is a permutation of the ids respecting every edge",
    (g) => {
      const r = topoSort(g.ids, g.deps);
      expect(r.ok).toBe(true);
      if (!r.ok) return;
      expect([...r.order].sort()).toEqual([...g.ids].sort());
      const pos = new Map(r.order.map((id, i) => [id, i]));
      for (const [from, to] of edges(g))
        expect(pos.get(from)!, `${from} must come before ${to}`).toBeLessThan(pos.get(to)!);
    },
  );

  test.prop([dagArb()], { numRuns: 100 })("independent steps keep declaration order", (g) => {
    const none = new Map(g.ids.map((id) => [id, [] as string[]]));
    expect(topoSort(g.ids, none)).toEqual({ ok: true, order: g.ids });
    // and with edges, the first step in the order is the first declared step without dependencies
    const r = topoSort(g.ids, g.deps);
    expect(r.ok && r.order[0]).toBe(g.ids.find((id) => g.deps.get(id)!.length === 0));
  });

  test.prop(
    [
      dagArb({ maxN: 40 }),
      fc.integer({ min: 1, max: 3 }),
      fc.array(fc.tuple(fc.nat(), fc.nat()), { minLength: 3, maxLength: 3 }),
    ],
    { numRuns: 300 },
  )("adding back edges makes a cycle: ok:false with a real cycle in execution direction", (g, k, picks) => {
    const n = g.ids.length;
    const byRank = [...g.rank.keys()];
    const deps = new Map([...g.deps].map(([id, ds]) => [id, [...ds]]));
    const back: [string, string][] = [];
    for (const [p, q] of picks.slice(0, k)) {
      let a = p % n;
      let b = q % n;
      if (a > b) [a, b] = [b, a];
      const lo = byRank[a]!;
      const hi = byRank[b]!;
      // make `hi` a dependent of `lo` (if it is not already; a === b gives a self-dependency)
      if (a !== b && !reachable(deps, lo, hi)) deps.get(hi)!.push(lo);
      // the back edge: `lo` depends on `hi`
      deps.get(lo)!.push(hi);
      back.push([hi, lo]);
    }
    const r = topoSort(g.ids, deps);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expectRealCycle(r.cycle, g.ids, deps);
    if (k === 1) {
      // every cycle of a DAG plus one edge goes through that edge
      const [hi, lo] = back[0]!;
      const i = r.cycle.indexOf(hi);
      expect(i).toBeGreaterThanOrEqual(0);
      expect(r.cycle[i + 1]).toBe(lo);
    }
  });

  test.prop([dagArb({ maxN: 30 }), fc.nat()], { numRuns: 100 })("a self-dependency is reported as [x, x]", (g, p) => {
    const x = g.ids[p % g.ids.length]!;
    const deps = new Map([...g.deps].map(([id, ds]) => [id, [...ds]]));
    deps.get(x)!.push(x);
    const r = topoSort(g.ids, deps);
    expect(r).toEqual({ ok: false, cycle: [x, x] });
  });
});

describe("topoSort (examples)", () => {
  it("orders a diamond", () => {
    const deps = new Map([
      ["d", ["b", "c"]],
      ["b", ["a"]],
      ["c", ["a"]],
      ["a", []],
    ]);
    expect(topoSort(["d", "b", "c", "a"], deps)).toEqual({ ok: true, order: ["a", "b", "c", "d"] });
  });

  it("names a cycle in execution direction", () => {
    // b depends on a, c on b, a on c: a -> b -> c -> a
    const deps = new Map([
      ["a", ["c"]],
      ["b", ["a"]],
      ["c", ["b"]],
      ["x", []],
      ["y", ["a"]],
    ]);
    const r = topoSort(["x", "a", "b", "c", "y"], deps);
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expectRealCycle(r.cycle, ["x", "a", "b", "c", "y"], deps);
    expect(r.cycle).toEqual(["a", "b", "c", "a"]);
  });

  it("ignores the empty graph", () => {
    expect(topoSort([], new Map())).toEqual({ ok: true, order: [] });
  });
});
