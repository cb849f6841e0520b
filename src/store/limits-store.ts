/**
 * Limits across every process sharing one Postgres (server or embedded): a semaphore per limit
 * key in `tool_chain_limit_holders`, a FIFO of waiters in `tool_chain_limit_waiters`, and recent
 * starts for `perSecond` rates (migration 3; the SQL function `tool_chain_limit_try` mirrors the
 * pure rules in src/kernel/limits.ts in one round trip, under a per-key advisory lock).
 *
 * Leases: a holder row expires `leaseTtlMs` after its last renewal; this process renews its
 * holders every third of that, so a process that dies releases its limits within the lease time.
 * Waiter rows are renewed by every poll, so a dead waiter drops out of the queue likewise.
 *
 * Waking: a release in this process wakes its local waiters at once; waiters of other processes
 * poll (5 ms doubling to `maxPollMs`, default 100 ms), so a hand-over between processes costs up
 * to that long.
 */
import { randomUUID } from "node:crypto";
import {
  acquireInOrder,
  limitKey,
  type AcquireOptions,
  type LimitClaim,
  type LimitCoordinator,
  type LimitHolder,
  type Permit,
} from "../kernel/limits.js";
import { table, type Database } from "./db.js";

export interface PgLimitsOptions {
  /** This process (the run lease owner id). */
  owner: string;
  /** Holders not renewed for this long are released. @default 15000 */
  leaseTtlMs?: number;
  /** Longest pause between two tries of a waiter. @default 100 */
  maxPollMs?: number;
}

export class PgLimits implements LimitCoordinator {
  private readonly owner: string;
  private readonly ttl: number;
  private readonly maxPollMs: number;
  private readonly holders: string;
  private readonly waiters: string;
  private readonly fn: string;
  private readonly local = new Map<string, Set<() => void>>();
  private heldHere = 0;
  private readonly renewTimer: NodeJS.Timeout;

  constructor(
    private readonly db: Database,
    opts: PgLimitsOptions,
  ) {
    this.owner = opts.owner;
    this.ttl = opts.leaseTtlMs ?? 15_000;
    this.maxPollMs = opts.maxPollMs ?? 100;
    this.holders = table(db, "tool_chain_limit_holders");
    this.waiters = table(db, "tool_chain_limit_waiters");
    this.fn = table(db, "tool_chain_limit_try");
    this.renewTimer = setInterval(() => void this.renew(), Math.max(50, Math.floor(this.ttl / 3)));
    this.renewTimer.unref();
  }

  acquire(claims: readonly LimitClaim[], holder: LimitHolder, opts: AcquireOptions): Promise<Permit> {
    return acquireInOrder(claims, (c) => this.one(c, holder, opts));
  }

  async close(): Promise<void> {
    clearInterval(this.renewTimer);
  }

  private async renew(): Promise<void> {
    if (this.heldHere <= 0) return;
    await this.db.pool
      .query(
        `UPDATE ${this.holders} SET expires_at = clock_timestamp() + $2 * interval '1 millisecond' WHERE owner = $1`,
        [this.owner, this.ttl],
      )
      .catch(() => undefined);
  }

  private async one(claim: LimitClaim, holder: LimitHolder, opts: AcquireOptions): Promise<Permit> {
    const key = limitKey(holder.workspaceId, claim);
    const holderId = `${holder.runId}:${holder.stepId}:${holder.attempt}:${randomUUID().slice(0, 8)}`;
    let delay = 5;
    let announced = false;
    for (;;) {
      if (opts.signal.aborted) {
        await this.db.pool
          .query(`DELETE FROM ${this.waiters} WHERE limit_key = $1 AND holder_id = $2`, [key, holderId])
          .catch(() => undefined);
        throw opts.signal.reason;
      }
      const { rows } = await this.db.pool.query<{ r: number }>(
        `SELECT ${this.fn}($1, $2, $3, $4, $5, $6, $7, $8) AS r`,
        [key, holderId, this.owner, holder.runId, holder.stepId, claim.limit, claim.perSecond ?? null, this.ttl],
      );
      const r = rows[0]!.r;
      if (r === 0) {
        this.heldHere++;
        return this.permit(key, holderId);
      }
      if (!announced) {
        announced = true;
        opts.onWait?.(claim);
      }
      await this.pause(key, r > 0 ? Math.min(r, this.maxPollMs) : delay, opts.signal);
      delay = Math.min(delay * 2, this.maxPollMs);
    }
  }

  private permit(key: string, holderId: string): Permit {
    let released = false;
    return {
      release: async () => {
        if (released) return;
        released = true;
        this.heldHere--;
        await this.db.pool.query(`DELETE FROM ${this.holders} WHERE limit_key = $1 AND holder_id = $2`, [
          key,
          holderId,
        ]);
        for (const wake of this.local.get(key) ?? []) wake();
      },
    };
  }

  /** Sleep until `ms` pass, a holder of `key` in this process releases, or the signal aborts. */
  private pause(key: string, ms: number, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      let set = this.local.get(key);
      if (!set) this.local.set(key, (set = new Set()));
      const wakers = set;
      const done = () => {
        clearTimeout(t);
        signal.removeEventListener("abort", done);
        wakers.delete(done);
        if (!wakers.size && this.local.get(key) === wakers) this.local.delete(key);
        resolve();
      };
      const t = setTimeout(done, ms);
      wakers.add(done);
      signal.addEventListener("abort", done, { once: true });
    });
  }
}
