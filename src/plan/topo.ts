/** Topological order (Kahn, declaration order among independent steps), naming a cycle if there is one. */
export function topoSort(
  ids: readonly string[],
  deps: ReadonlyMap<string, readonly string[]>,
): { ok: true; order: string[] } | { ok: false; cycle: string[] } {
  const indeg = new Map<string, number>();
  const succ = new Map<string, string[]>();
  for (const id of ids) {
    indeg.set(id, deps.get(id)?.length ?? 0);
    succ.set(id, []);
  }
  for (const id of ids) for (const d of deps.get(id) ?? []) succ.get(d)!.push(id);
  const order: string[] = [];
  const queue = ids.filter((id) => indeg.get(id) === 0);
  for (let qi = 0; qi < queue.length; qi++) {
    const id = queue[qi]!;
    order.push(id);
    for (const s of succ.get(id)!) {
      const n = indeg.get(s)! - 1;
      indeg.set(s, n);
      if (n === 0) queue.push(s);
    }
  }
  if (order.length === ids.length) return { ok: true, order };
  // walk dependencies among the leftover nodes until one repeats: that is a cycle
  const left = new Set(ids.filter((id) => indeg.get(id)! > 0));
  let cur = ids.find((id) => left.has(id))!;
  const seen = new Map<string, number>();
  const path: string[] = [];
  while (!seen.has(cur)) {
    seen.set(cur, path.length);
    path.push(cur);
    cur = (deps.get(cur) ?? []).find((d) => left.has(d))!;
  }
  // path goes against the edges (node -> its dependency); report in execution direction
  const cycle = path.slice(seen.get(cur)!).reverse();
  // start at the step declared first, so the message is stable
  const declared = new Map(ids.map((id, i) => [id, i]));
  let start = 0;
  cycle.forEach((id, i) => {
    if (declared.get(id)! < declared.get(cycle[start]!)!) start = i;
  });
  const rotated = [...cycle.slice(start), ...cycle.slice(0, start)];
  return { ok: false, cycle: [...rotated, rotated[0]!] };
}
