/**
 * Which (point, passage) pairs the crash-point suite kills at, from a clean run's recording of
 * every commit it passed (src/store/commit-points.ts). Pure: the suite prints what it decided.
 *
 * - Timing-driven points (heartbeats, limit polls, claims: how often they pass depends on the
 *   clock) are killed at their first passage only; later passages land nowhere reproducible.
 * - FAULT_MAX_N=n kills the first n passages of every point, and beyond them a sample of
 *   FAULT_SAMPLE passages per point chosen by FAULT_SEED (printed, so a failure can be replayed);
 *   without it every passage is killed. Every distinct point is killed at least once either way.
 */

/** Commits whose passages depend on timers rather than on the plan's progress. */
export const TIMED = [
  /\(lease_expires_at\)/, // lease heartbeat
  /update\.tool_chain_limit_holders\(expires_at\)/, // limit holders' renewal
  /call\.tool_chain_limit_try/, // a limit wait polls
];
export const isTimed = (point: string) => TIMED.some((r) => r.test(point));

/**
 * A node's events riding in its writes' statement (src/runtime/events-ride.ts), or a step's in its
 * task result's (`checkpoint:putWrites(task)+…`, src/runtime/task-ride.ts): whether that
 * statement carries events depends on whether a batch cut earlier (on the flush's own wait) had
 * already stored them, so a killed run may pass it fewer times than the clean one, or not at all
 * (its writes then go on their own, a point of their own). The suite still requires kills at it
 * to land somewhere (crash-points.faults.ts).
 */
export const isRide = (point: string) =>
  /^checkpoint:putWrites/.test(point) && /insert\.tool_chain_event_logs/.test(point);

export interface Recorded {
  /** Passages in the order they happened: `point:n`. */
  order: string[];
  /** Passages per point. */
  counts: Map<string, number>;
}

export function parseRecording(text: string): Recorded {
  const order = [...new Set(text.split("\n").filter(Boolean))];
  const counts = new Map<string, number>();
  for (const p of order) {
    const at = p.lastIndexOf(":");
    const point = p.slice(0, at);
    counts.set(point, Math.max(counts.get(point) ?? 0, Number(p.slice(at + 1))));
  }
  return { order, counts };
}

/** A small seeded generator (mulberry32): the same seed, the same sample. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface KillPlan {
  kills: string[];
  /** Passages recorded but not killed, and why (printed with the reach figures). */
  skipped: { passage: string; why: string }[];
}

export function planKills(rec: Recorded, o: { maxN: number; sample: number; seed: number }): KillPlan {
  const kills: string[] = [];
  const skipped: KillPlan["skipped"] = [];
  const random = rng(o.seed);
  const beyond = new Map<string, string[]>();
  for (const p of rec.order) {
    const at = p.lastIndexOf(":");
    const point = p.slice(0, at);
    const n = Number(p.slice(at + 1));
    if (isTimed(point) && n > 1) skipped.push({ passage: p, why: "timing-driven point: first passage only" });
    else if (n <= o.maxN) kills.push(p);
    else beyond.set(point, [...(beyond.get(point) ?? []), p]);
  }
  for (const [, ps] of beyond) {
    const pick = new Set<string>();
    while (pick.size < Math.min(o.sample, ps.length)) pick.add(ps[Math.floor(random() * ps.length)]!);
    for (const p of ps)
      if (pick.has(p)) kills.push(p);
      else skipped.push({ passage: p, why: `beyond FAULT_MAX_N=${o.maxN}, not sampled (seed ${o.seed})` });
  }
  return { kills, skipped };
}
