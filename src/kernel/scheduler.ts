/**
 * The DAG scheduler: pure, synchronous, no timers and no I/O. The driver (graphs/scheduler/)
 * asks it which steps may start now and tells it when each one ends; it answers with the steps
 * released or skipped. Limits: a global concurrency cap, serial keys (equal keys never overlap)
 * and named resources with a limit. Among ready steps, the one with the longest remaining path
 * starts first (critical-path list scheduling).
 */
import type { FailurePolicy } from "../plan/schema.js";

export interface SchedNode {
  id: string;
  deps: readonly string[];
  successors: readonly string[];
  /** Higher starts first; ties go to declaration order. */
  priority: number;
  onFailure: FailurePolicy;
}

export interface Claims {
  /** The step may not overlap any running step holding one of these keys. */
  serialKeys?: readonly string[];
  resource?: { name: string; limit: number };
}

export type SchedState = "blocked" | "ready" | "running" | "parked" | "completed" | "failed" | "skipped" | "cancelled";

export interface SchedulerOptions {
  maxConcurrency?: number;
}

export interface FailResult {
  /** Transitive dependents that will never run. */
  skipped: string[];
  /** Successors released because the failure policy is `continue`. */
  released: string[];
  /** fail_fast: the run stops launching; the caller cancels what is running. */
  halted: boolean;
}

/** Restored statuses, for a scheduler re-created from durable run state. */
export type RestoredStatus = "completed" | "failed" | "skipped" | "cancelled" | "parked";

export class Scheduler {
  private readonly nodes: ReadonlyMap<string, SchedNode>;
  private readonly order: ReadonlyMap<string, number>;
  private readonly state = new Map<string, SchedState>();
  private readonly waiting = new Map<string, number>();
  /** Ready steps by priority. Lazy deletion: entries whose step is no longer ready are dropped when popped. */
  private readonly heap: string[] = [];
  private readyCount = 0;
  private readonly claimsHeld = new Map<string, Claims>();
  private readonly serialBusy = new Set<string>();
  private readonly resourceUse = new Map<string, number>();
  private readonly maxConcurrency: number;
  private runningCount = 0;
  private unfinished: number;
  private _halted = false;

  constructor(nodes: readonly SchedNode[], opts: SchedulerOptions = {}) {
    const max = opts.maxConcurrency ?? Number.POSITIVE_INFINITY;
    if (!(max >= 1)) throw new TypeError(`Expected maxConcurrency to be a positive number, got ${max}`);
    this.maxConcurrency = max;
    this.nodes = new Map(nodes.map((n) => [n.id, n]));
    this.order = new Map(nodes.map((n, i) => [n.id, i]));
    this.unfinished = nodes.length;
    for (const n of nodes) {
      this.waiting.set(n.id, n.deps.length);
      this.state.set(n.id, "blocked");
    }
    for (const n of nodes) if (n.deps.length === 0) this.makeReady(n.id);
  }

  /** Rebuild from durable state: apply finished steps in dependency order. */
  static restore(
    nodes: readonly SchedNode[],
    opts: SchedulerOptions,
    statuses: ReadonlyMap<string, RestoredStatus>,
    topo: readonly string[],
  ): Scheduler {
    const s = new Scheduler(nodes, opts);
    for (const id of topo) {
      const st = statuses.get(id);
      if (!st) continue;
      if (st === "completed") s.markRunning(id) && s.complete(id);
      else if (st === "failed") s.markRunning(id) && s.fail(id);
      else if (st === "skipped" || st === "cancelled") s.finishWithout(id, st);
      else if (st === "parked") s.markRunning(id) && s.park(id);
    }
    return s;
  }

  get halted(): boolean {
    return this._halted;
  }
  get running(): number {
    return this.runningCount;
  }
  /** Every step reached a terminal state. */
  get done(): boolean {
    return this.unfinished === 0;
  }
  status(id: string): SchedState {
    const s = this.state.get(id);
    if (!s) throw new Error(`unknown step "${id}"`);
    return s;
  }
  idsIn(st: SchedState): string[] {
    return [...this.state].filter(([, s]) => s === st).map(([id]) => id);
  }
  /** Nothing runs and nothing more can start now (the run ends, or waits for a confirmation). */
  get idle(): boolean {
    // with nothing running every claim is free, so a ready step could start: not idle
    return this.runningCount === 0 && (this._halted || this.readyCount === 0);
  }

  /**
   * Start as many ready steps as the limits allow, highest priority first. A ready step blocked by
   * its serial key or resource is passed over (not head-of-line blocking) and stays ready.
   */
  start(claimsOf: (id: string) => Claims = () => ({}), max = Number.POSITIVE_INFINITY): string[] {
    if (this._halted) return [];
    const started: string[] = [];
    const passed: string[] = [];
    while (this.readyCount > 0 && this.runningCount < this.maxConcurrency && started.length < max) {
      const id = this.pop();
      if (id === undefined) break;
      const c = claimsOf(id);
      if (
        c.serialKeys?.some((k) => this.serialBusy.has(k)) ||
        (c.resource && (this.resourceUse.get(c.resource.name) ?? 0) >= c.resource.limit)
      ) {
        passed.push(id);
        continue;
      }
      for (const k of c.serialKeys ?? []) this.serialBusy.add(k);
      if (c.resource) this.resourceUse.set(c.resource.name, (this.resourceUse.get(c.resource.name) ?? 0) + 1);
      this.claimsHeld.set(id, c);
      this.state.set(id, "running");
      this.runningCount++;
      started.push(id);
    }
    for (const id of passed) this.push(id); // still ready: back in the queue
    return started;
  }

  /** A running step now waits for a human: it holds no slot meanwhile. */
  park(id: string): void {
    this.expect(id, "running");
    this.release(id);
    this.state.set(id, "parked");
  }
  /** An approved step becomes ready again. */
  unpark(id: string): void {
    this.expect(id, "parked");
    this.state.set(id, "blocked");
    this.makeReady(id);
  }

  /** A step waiting for a human is finished without running (rejected, or cancelled). */
  completeParkedAs(id: string, outcome: "failed" | "cancelled"): FailResult {
    this.expect(id, "parked");
    this.state.set(id, "running");
    this.runningCount++;
    if (outcome === "failed") return this.fail(id);
    this.cancelRunning(id);
    return { skipped: [], released: [], halted: this._halted };
  }

  /** A step waiting for a human is declared done without running (its effect is known to have happened). */
  completeParked(id: string): string[] {
    this.expect(id, "parked");
    this.state.set(id, "running");
    this.runningCount++;
    return this.complete(id);
  }

  complete(id: string): string[] {
    this.expect(id, "running");
    this.release(id);
    this.state.set(id, "completed");
    this.unfinished--;
    return this.releaseSuccessors(id);
  }

  fail(id: string): FailResult {
    this.expect(id, "running");
    this.release(id);
    this.state.set(id, "failed");
    this.unfinished--;
    const policy = this.nodes.get(id)!.onFailure;
    if (policy === "continue") return { skipped: [], released: this.releaseSuccessors(id), halted: false };
    if (policy === "fail_fast") {
      this._halted = true;
      return { skipped: [], released: [], halted: true };
    }
    return { skipped: this.skipDependents(id), released: [], halted: false };
  }

  /** A running step was aborted by the run (fail_fast, deadline, cancel). */
  cancelRunning(id: string): void {
    this.expect(id, "running");
    this.release(id);
    this.state.set(id, "cancelled");
    this.unfinished--;
  }

  /** Stop launching. Every step that has not started (or waits for a human) becomes cancelled. */
  halt(): string[] {
    this._halted = true;
    const out: string[] = [];
    for (const [id, st] of this.state) {
      if (st === "blocked" || st === "ready" || st === "parked") {
        this.state.set(id, "cancelled");
        this.unfinished--;
        out.push(id);
      }
    }
    this.heap.length = 0;
    this.readyCount = 0;
    return out;
  }

  // internals

  private markRunning(id: string): true {
    this.removeFromHeap(id);
    this.state.set(id, "running");
    this.runningCount++;
    return true;
  }
  private finishWithout(id: string, st: "skipped" | "cancelled"): void {
    if (this.state.get(id) === "skipped" || this.state.get(id) === "cancelled") return;
    this.removeFromHeap(id);
    this.state.set(id, st);
    this.unfinished--;
  }
  private expect(id: string, st: SchedState): void {
    const cur = this.state.get(id);
    if (cur !== st) throw new Error(`scheduler: step "${id}" is ${cur ?? "unknown"}, expected ${st}`);
  }
  private release(id: string): void {
    const c = this.claimsHeld.get(id);
    if (c) {
      for (const k of c.serialKeys ?? []) this.serialBusy.delete(k);
      if (c.resource) this.resourceUse.set(c.resource.name, (this.resourceUse.get(c.resource.name) ?? 1) - 1);
      this.claimsHeld.delete(id);
    }
    this.runningCount--;
  }
  private releaseSuccessors(id: string): string[] {
    const released: string[] = [];
    for (const s of this.nodes.get(id)!.successors) {
      const n = this.waiting.get(s)! - 1;
      this.waiting.set(s, n);
      if (n === 0 && this.state.get(s) === "blocked" && !this._halted) {
        this.makeReady(s);
        released.push(s);
      }
    }
    return released;
  }
  private skipDependents(id: string): string[] {
    const skipped: string[] = [];
    const stack = [...this.nodes.get(id)!.successors];
    while (stack.length) {
      const s = stack.pop()!;
      const st = this.state.get(s);
      if (st !== "blocked" && st !== "ready") continue;
      this.removeFromHeap(s);
      this.state.set(s, "skipped");
      this.unfinished--;
      skipped.push(s);
      stack.push(...this.nodes.get(s)!.successors);
    }
    return skipped;
  }
  private makeReady(id: string): void {
    this.push(id);
  }

  // binary max-heap on (priority desc, declaration order asc)
  private before(a: string, b: string): boolean {
    const pa = this.nodes.get(a)!.priority;
    const pb = this.nodes.get(b)!.priority;
    return pa !== pb ? pa > pb : this.order.get(a)! < this.order.get(b)!;
  }
  private push(id: string): void {
    this.state.set(id, "ready");
    this.readyCount++;
    const h = this.heap;
    h.push(id);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.before(h[i]!, h[p]!)) break;
      [h[i], h[p]] = [h[p]!, h[i]!];
      i = p;
    }
  }
  private pop(): string | undefined {
    const h = this.heap;
    while (h.length) {
      const top = h[0]!;
      const last = h.pop()!;
      if (h.length) {
        h[0] = last;
        this.siftDown(0);
      }
      if (this.state.get(top) === "ready") {
        this.readyCount--;
        this.state.set(top, "blocked"); // the caller sets its real state (running) or pushes it back
        return top;
      }
    }
    return undefined;
  }
  private siftDown(i: number): void {
    const h = this.heap;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && this.before(h[l]!, h[m]!)) m = l;
      if (r < h.length && this.before(h[r]!, h[m]!)) m = r;
      if (m === i) return;
      [h[i], h[m]] = [h[m]!, h[i]!];
      i = m;
    }
  }
  private removeFromHeap(id: string): void {
    // lazy: the entry stays in the heap and is dropped when popped (its state is no longer "ready")
    if (this.state.get(id) === "ready") this.readyCount--;
  }
}
