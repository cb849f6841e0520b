/**
 * "Is step a a (transitive) dependency of step b?" for every pair, answered in O(1) after one
 * pass over the plan in topological order: each step's ancestors are a bitset, the union of its
 * dependencies' bitsets plus the dependencies themselves. Building costs O(edges × steps / 32)
 * word operations and steps² / 8 bytes (10,000 steps: 12.5 MB, ~30 ms), instead of one backwards
 * search per reference (quadratic in plan size, seconds at 10,000 steps). Pure; a generator so
 * that a caller can slice the work (it yields once per step).
 */
export interface Reachability {
  /** True when `anc` is a direct or transitive dependency of `of`. */
  isAncestor(anc: string, of: string): boolean;
}

/**
 * `order` must be topological (every step after its dependencies); `deps` gives each step's
 * direct dependencies (ids that appear in `order`).
 */
export function* ancestorSets(
  order: readonly string[],
  deps: ReadonlyMap<string, readonly string[]>,
): Generator<void, Reachability> {
  const n = order.length;
  const words = (n + 31) >>> 5;
  const index = new Map<string, number>();
  order.forEach((id, i) => index.set(id, i));
  const bits = new Uint32Array(n * words);
  for (let i = 0; i < n; i++) {
    yield; // a caller may give the event loop back between rows (compilePlanAsync)
    const row = i * words;
    for (const d of deps.get(order[i]!) ?? []) {
      const j = index.get(d)!;
      // a dependency comes earlier in topological order: only the words up to j can be set
      const from = j * words;
      const last = j >>> 5;
      for (let w = 0; w <= last; w++) bits[row + w]! |= bits[from + w]!;
      bits[row + last]! |= 1 << (j & 31);
    }
  }
  return {
    isAncestor(anc, of) {
      const a = index.get(anc);
      const b = index.get(of);
      if (a === undefined || b === undefined || a >= b) return false;
      return (bits[b * words + (a >>> 5)]! & (1 << (a & 31))) !== 0;
    },
  };
}
