/**
 * Cross-run limits for runtimes that share one process (the in-memory runtime, or several
 * Runtime instances over one MemoryRunStore): a FIFO semaphore per limit key, with an optional
 * rolling-second rate. Nothing can crash without the semaphores, so there are no leases.
 */
import {
  acquireInOrder,
  admits,
  limitKey,
  nextStartAt,
  type AcquireOptions,
  type LimitClaim,
  type LimitCoordinator,
  type LimitHolder,
  type Permit,
} from "../kernel/limits.js";

interface Waiter {
  claim: LimitClaim;
  grant: () => void;
}

interface Semaphore {
  held: number;
  queue: Waiter[];
  starts: number[];
  timer?: NodeJS.Timeout;
}

export class MemoryLimits implements LimitCoordinator {
  private readonly sems = new Map<string, Semaphore>();

  constructor(private readonly now: () => number = Date.now) {}

  acquire(claims: readonly LimitClaim[], holder: LimitHolder, opts: AcquireOptions): Promise<Permit> {
    return acquireInOrder(claims, (c) => this.one(limitKey(holder.workspaceId, c), c, opts));
  }

  /** Holders and waiters per key (tests, diagnostics). */
  snapshot(): Record<string, { held: number; waiting: number }> {
    const out: Record<string, { held: number; waiting: number }> = {};
    for (const [k, s] of this.sems) out[k] = { held: s.held, waiting: s.queue.length };
    return out;
  }

  async close(): Promise<void> {
    for (const s of this.sems.values()) clearTimeout(s.timer);
  }

  private one(key: string, claim: LimitClaim, opts: AcquireOptions): Promise<Permit> {
    let s = this.sems.get(key);
    if (!s) this.sems.set(key, (s = { held: 0, queue: [], starts: [] }));
    const sem = s;
    return new Promise<Permit>((resolve, reject) => {
      if (opts.signal.aborted) return reject(opts.signal.reason);
      let granted = false;
      const onAbort = () => {
        const i = sem.queue.indexOf(w);
        if (i >= 0) sem.queue.splice(i, 1);
        this.pump(key, sem); // a waiter behind it may now be first
        reject(opts.signal.reason);
      };
      const w: Waiter = {
        claim,
        grant: () => {
          granted = true;
          opts.signal.removeEventListener("abort", onAbort);
          let released = false;
          resolve({
            release: async () => {
              if (released) return;
              released = true;
              sem.held--;
              this.pump(key, sem);
            },
          });
        },
      };
      sem.queue.push(w);
      this.pump(key, sem);
      if (!granted) {
        opts.onWait?.(claim);
        opts.signal.addEventListener("abort", onAbort, { once: true });
      }
    });
  }

  /** Admit waiters from the head of the queue while the limit (and the rate) allow. */
  private pump(key: string, s: Semaphore): void {
    clearTimeout(s.timer);
    s.timer = undefined;
    while (s.queue.length) {
      const head = s.queue[0]!;
      if (!admits(head.claim.limit, s.held, 0)) break;
      const now = this.now();
      const at = nextStartAt(head.claim.perSecond, s.starts, now);
      if (at > now) {
        s.timer = setTimeout(() => this.pump(key, s), at - now);
        s.timer.unref?.();
        break;
      }
      s.queue.shift();
      s.held++;
      if (head.claim.perSecond !== undefined) {
        s.starts.push(now);
        s.starts = s.starts.filter((t) => t > now - 1_000);
      }
      head.grant();
    }
    if (!s.held && !s.queue.length && !s.timer && !s.starts.length) this.sems.delete(key);
  }
}
