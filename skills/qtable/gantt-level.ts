/**
 * The Gantt's forward pass with resource levelling, pure: tasks are placed as early as their
 * incoming links allow and, when they have an assignee, in the first gap of that assignee's
 * bookings long enough for them, so nobody works on two tasks at once. Without assignees it is
 * the plain critical-path forward pass in dependency order.
 *
 * Placement is a serial schedule: of the tasks whose predecessors are placed, the one that can
 * start first goes next (ties: the longer chain of work behind it, then input order). A task
 * pushed back by its assignee records the booking it waits for (`waitsFor`): the caller treats it
 * as a finish-to-start link, so slack and critical chains account for the wait. Placement order is
 * a topological order of links plus waits (a wait always points at a task placed before).
 */
export interface Edge {
  from: string;
  type: "FS" | "SS" | "FF";
  /** Half days. */
  lag: number;
}
export type Bound = (e: Edge, es: ReadonlyMap<string, number>, ef: ReadonlyMap<string, number>, d: number) => number;

export interface Levelled {
  es: Map<string, number>;
  ef: Map<string, number>;
  /** Placement order (dependencies and waits first). */
  order: string[];
  /** Task → the task of the same assignee it was moved after. */
  waitsFor: Map<string, string>;
}

export function levelSchedule(
  tasks: readonly { key: string; assignee?: string }[],
  order: readonly string[],
  incoming: ReadonlyMap<string, readonly Edge[]>,
  dur: ReadonlyMap<string, number>,
  bound: Bound,
): Levelled {
  const es = new Map<string, number>();
  const ef = new Map<string, number>();
  const waitsFor = new Map<string, string>();
  const earliest = (k: string) => Math.max(0, ...incoming.get(k)!.map((e) => bound(e, es, ef, dur.get(k)!)));
  const assignee = new Map(tasks.filter((t) => t.assignee).map((t) => [t.key, t.assignee!]));
  if (!assignee.size) {
    for (const k of order) {
      es.set(k, earliest(k));
      ef.set(k, es.get(k)! + dur.get(k)! - 1);
    }
    return { es, ef, order: [...order], waitsFor };
  }

  // the work behind each task (its duration plus its longest chain of successors), for ties
  const succ = new Map<string, string[]>(tasks.map((t) => [t.key, []]));
  for (const [to, edges] of incoming) for (const e of edges) succ.get(e.from)!.push(to);
  const tail = new Map<string, number>();
  for (const k of [...order].reverse())
    tail.set(k, dur.get(k)! + Math.max(0, ...succ.get(k)!.map((s) => tail.get(s)!)));
  const position = new Map(tasks.map((t, i) => [t.key, i]));

  const booked = new Map<string, { s: number; e: number; key: string }[]>();
  const waiting = new Map(tasks.map((t) => [t.key, new Set(incoming.get(t.key)!.map((e) => e.from))]));
  const ready = new Set(tasks.filter((t) => !waiting.get(t.key)!.size).map((t) => t.key));
  const placed: string[] = [];
  while (ready.size) {
    let next: string | undefined;
    let nextBound = Infinity;
    for (const k of ready) {
      const b = earliest(k);
      if (
        next === undefined ||
        b < nextBound ||
        (b === nextBound &&
          (tail.get(k)! > tail.get(next)! ||
            (tail.get(k) === tail.get(next) && position.get(k)! < position.get(next)!)))
      ) {
        next = k;
        nextBound = b;
      }
    }
    const k = next!;
    ready.delete(k);
    const d = dur.get(k)!;
    let start = nextBound;
    const who = assignee.get(k);
    if (who !== undefined && d > 0) {
      const list = booked.get(who) ?? [];
      let blocker: string | undefined;
      for (const iv of list) {
        if (iv.e < start) continue;
        if (iv.s > start + d - 1) break;
        start = iv.e + 1;
        blocker = iv.key;
      }
      if (blocker !== undefined) waitsFor.set(k, blocker);
      list.push({ s: start, e: start + d - 1, key: k });
      list.sort((a, b) => a.s - b.s);
      booked.set(who, list);
    }
    es.set(k, start);
    ef.set(k, start + d - 1);
    placed.push(k);
    for (const s of succ.get(k)!) {
      const w = waiting.get(s)!;
      w.delete(k);
      if (!w.size && !es.has(s)) ready.add(s);
    }
  }
  return { es, ef, order: placed, waitsFor };
}
