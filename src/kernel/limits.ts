/**
 * Limits that hold across runs and processes: a skill's serial key (equal keys never overlap), a
 * named resource with a concurrency `limit` and an optional `perSecond` rate, and
 * `parallelSafe: false` (one step of the skill at a time). The per-run Scheduler enforces them
 * inside one run; a LimitCoordinator (memory: src/store/memory-limits.ts, Postgres:
 * src/store/limits-store.ts) enforces them between runs of a workspace.
 *
 * This module is the pure part: naming, canonical order (deadlock freedom), FIFO admission and
 * the rate window arithmetic, shared by both coordinators.
 */

/** One limit a step needs while it executes. */
export interface LimitClaim {
  /** What the step view shows while waiting: `{ serialKey }` or `{ resource }`. */
  kind: "serialKey" | "resource";
  /** The serial key's value, or the resource's name (`skill:<name>` for `parallelSafe: false`). */
  name: string;
  /** Concurrent holders allowed (1 for serial keys). */
  limit: number;
  /** Starts allowed per rolling second (resources only). */
  perSecond?: number;
}

/** Shown in the step view (and the `step_waiting_for_limit` event) while a step waits. */
export type WaitingFor = { serialKey: string } | { resource: string };

export function waitingFor(c: LimitClaim): WaitingFor {
  return c.kind === "serialKey" ? { serialKey: c.name } : { resource: c.name };
}

/**
 * The coordination key of a claim inside a workspace (the unit a semaphore counts): JSON, so it is
 * unambiguous whatever the names contain and storable in Postgres text (which refuses NUL).
 */
export function limitKey(workspaceId: string, c: LimitClaim): string {
  return JSON.stringify([workspaceId, c.kind, c.name]);
}

/**
 * Claims in the one global order every acquirer uses: a step that needs two keys takes them in
 * this order, so no two steps can each hold one key and wait for the other (no deadlock).
 * Duplicates collapse (the tighter limit wins).
 */
export function canonicalClaims(claims: readonly LimitClaim[]): LimitClaim[] {
  const byKey = new Map<string, LimitClaim>();
  for (const c of claims) {
    const k = `${c.kind}\u0000${c.name}`;
    const prev = byKey.get(k);
    if (!prev) byKey.set(k, { ...c });
    else
      byKey.set(k, {
        ...prev,
        limit: Math.min(prev.limit, c.limit),
        perSecond: minDefined(prev.perSecond, c.perSecond),
      });
  }
  return [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, c]) => c);
}

function minDefined(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}

/**
 * FIFO admission: a waiter may take the limit when the holders plus the live waiters queued
 * before it leave room. So a waiter is never overtaken by one that arrived later (no starvation),
 * and with a limit above 1 the first `limit - held` waiters are admitted together.
 */
export function admits(limit: number, held: number, waitersAhead: number): boolean {
  return held + waitersAhead < limit;
}

/**
 * The rate window: with `perSecond` starts allowed in any rolling second and the start times
 * (ms) of recent holders, when may the next start happen? `now` when there is room, else one
 * second after the oldest start that fills the window.
 */
export function nextStartAt(perSecond: number | undefined, recentStarts: readonly number[], now: number): number {
  if (perSecond === undefined) return now;
  const inWindow = recentStarts.filter((t) => t > now - 1_000).sort((a, b) => a - b);
  if (inWindow.length < perSecond) return now;
  return inWindow[inWindow.length - perSecond]! + 1_000;
}

/** Who holds or waits for a limit: one step attempt. */
export interface LimitHolder {
  workspaceId: string;
  runId: string;
  stepId: string;
  attempt: number;
}

export interface AcquireOptions {
  /** Aborting stops waiting (cancel, fail_fast, deadline); limits already taken are released. */
  signal: AbortSignal;
  /** Called once per claim the step has to wait for, before it waits. */
  onWait?: (claim: LimitClaim) => void;
}

/** Held limits; release exactly once, when the attempt ends. */
export interface Permit {
  release(): Promise<void>;
}

export interface LimitCoordinator {
  /** Take every claim (in canonical order), waiting FIFO for each; resolves once all are held. */
  acquire(claims: readonly LimitClaim[], holder: LimitHolder, opts: AcquireOptions): Promise<Permit>;
  /** Stop background work (lease renewal); held permits are not released. */
  close(): Promise<void>;
}

/** What the graph's scheduler node needs: the coordinator, and a run's workspace (limits are per workspace). */
export interface RunLimits {
  coordinator: LimitCoordinator;
  workspaceOf(runId: string): Promise<string>;
}

/**
 * Acquire claims one by one in canonical order with `one` (a coordinator's single-claim wait);
 * on failure or abort, release what was taken. Shared by both coordinators.
 */
export async function acquireInOrder(
  claims: readonly LimitClaim[],
  one: (c: LimitClaim) => Promise<Permit>,
): Promise<Permit> {
  const held: Permit[] = [];
  try {
    for (const c of canonicalClaims(claims)) held.push(await one(c));
  } catch (e) {
    for (const p of held.reverse()) await p.release().catch(() => undefined);
    throw e;
  }
  let released = false;
  return {
    async release() {
      if (released) return;
      released = true;
      for (const p of held.reverse()) await p.release().catch(() => undefined);
    },
  };
}
