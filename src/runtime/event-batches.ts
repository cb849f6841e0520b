/**
 * A drive's events on their way to the run store: batched (one append per batch, in emission
 * order), never ahead of the checkpoint writes they report (write-barrier.ts), and a node's events
 * before its own writes (graphs/emit.ts eventsBeforeWrites) either stored first or, where the store
 * and the saver share a database, riding in those writes' statement (events-ride.ts): both commit
 * or neither, one round trip where there were two, one after the other.
 *
 * Every batch is cut in turn on one chain (`turn`), when its turn comes: a batch's events are
 * numbered from the run row the previous batch left, so no batch may start its statement before
 * the previous one settled, and batches are stored in the order they were cut. An ordinary flush
 * waits for the task and node writes in flight before it queues and again before it stores; a
 * ride, queued when its node's writes are put, before it stores. None waits for a checkpoint, so
 * the run's final checkpoint can wait for all of them (storedAll).
 */
import type { EmittedEvent, RunEvent } from "../kernel/events.js";
import type { AppendRider } from "../store/run-store.js";
import type { NodeRides, PutWrites } from "../kernel/node-rides.js";

export interface EventBatchesDeps {
  /**
   * Resolves once the task and node writes started for the run so far (and in the microtasks
   * pending) have settled; never waits for a checkpoint (write-barrier.ts).
   */
  settled(): Promise<void>;
  append(batch: EmittedEvent[]): Promise<RunEvent[]>;
  /** The batch's append riding in another statement; undefined: it is appended on its own. */
  rider?(batch: EmittedEvent[]): AppendRider | undefined;
  /** A batch was stored: the events as numbered. */
  stored(numbered: RunEvent[]): void;
  /** An append failed: the drive stops. */
  failed(e: unknown): void;
}

export class EventBatches implements NodeRides {
  private buffer: EmittedEvent[] = [];
  /** The last batch cut (appending or riding): the next one starts after it. */
  private turn: Promise<void> = Promise.resolve();
  private cutting = 0;
  /** Of the batches in turn (`cutting`), those cut by a task's write riding (rideTask). */
  private taskRides = 0;
  /** A flush waiting for the writes in flight before it cuts. */
  private waiting: Promise<void> | undefined;
  /** Node tasks whose events wait for their writes (offered, not yet claimed), with what ends the wait. */
  private readonly offered = new Map<string, () => void>();
  /** Resolves when no offer is left (a flush waits for it before it cuts). */
  private offersGone: Promise<void> | undefined;
  private offersEnd: (() => void) | undefined;
  /** The stream ended: no node offers any more. */
  private closed = false;
  private error: unknown;
  private failedOnce = false;
  /** Keys of the events this drive's batches stored. */
  readonly persisted = new Set<string>();
  private waiters: { left: Set<string>; resolve: () => void; reject: (e: unknown) => void }[] = [];

  constructor(private readonly deps: EventBatchesDeps) {}

  get failure(): unknown {
    return this.failedOnce ? this.error : undefined;
  }

  /** Nothing buffered, waiting or being stored. */
  get idle(): boolean {
    return !this.waiting && !this.buffer.length && !this.cutting && !this.offered.size;
  }

  /**
   * Every event pushed so far is stored (a flush still waiting for the writes in flight has
   * nothing to cut: that wait may be on the very checkpoint asking).
   */
  get allStored(): boolean {
    return !this.failedOnce && !this.buffer.length && !this.cutting && !this.offered.size;
  }

  push(ev: EmittedEvent): void {
    this.buffer.push(ev);
    void this.flush();
  }

  /**
   * Resolves once the events with these keys are stored; rejects once an append failed (the drive
   * stops, and the node that waits must not save writes its events are not stored before: it runs
   * again on the next drive). Resolves when the drive ended.
   */
  whenStored(keys: readonly string[]): Promise<void> {
    const left = new Set(keys.filter((k) => !this.persisted.has(k)));
    if (!left.size) return Promise.resolve();
    if (this.failedOnce) return Promise.reject(this.error);
    return new Promise<void>((resolve, reject) => this.waiters.push({ left, resolve, reject }));
  }

  offer(taskId: string, keys: string[]): boolean {
    if (!this.deps.rider || this.failedOnce || this.closed) return false;
    if (keys.every((k) => this.persisted.has(k))) return true;
    if (!this.offered.size) {
      let resolve!: () => void;
      this.offersGone = new Promise<void>((r) => (resolve = r));
      this.offersEnd = resolve;
    }
    this.offered.set(taskId, () => {
      if (!this.offered.delete(taskId) || this.offered.size) return;
      this.offersEnd?.();
      this.offersGone = this.offersEnd = undefined;
    });
    return true;
  }

  claim(taskId: string, put: PutWrites): Promise<void> | undefined {
    const end = this.offered.get(taskId);
    if (!end) return undefined;
    // in turn, like every batch: cut when its turn comes, so batches are stored as they were cut
    const done = this.inTurn(async () => {
      // the drive stops: these writes are not saved either, so the node runs again on the next
      // drive and emits its events again (their keys make that a no-op for any stored)
      if (this.failedOnce) throw this.error;
      const batch = this.cut();
      // the task writes these events report are saved first
      if (batch.length) await this.deps.settled();
      return this.ride(batch, put);
    });
    end();
    return done;
  }

  rideTask(put: PutWrites, before: () => Promise<unknown>): Promise<void> | undefined {
    // behind task rides only: a flush or a node's ride in turn waits for the run's writes, this
    // one included, and this write waiting for its turn behind it would wait for itself. Task
    // rides ahead wait only for writes started before theirs, never for a later one.
    if (!this.deps.rider || this.failedOnce || this.closed || this.offered.size || !this.buffer.length)
      return undefined;
    if (this.cutting !== this.taskRides) return undefined;
    // cut now: an event pushed later may report a write started after this one
    const batch = this.cut();
    this.taskRides++;
    return this.inTurn(async () => {
      try {
        await before();
        await this.ride(batch, put);
      } finally {
        this.taskRides--;
      }
    });
  }

  /**
   * Before a run's final checkpoint carries its projection: resolves once every batch cut or
   * waiting so far settled (no batch waits for a checkpoint: no cycle), true when every event
   * pushed is stored.
   */
  async storedAll(): Promise<boolean> {
    while (!this.failedOnce && (this.waiting || this.cutting)) await (this.waiting ?? this.turn);
    return this.allStored;
  }

  /** Cut and store what is buffered, once the task and node writes in flight settled. */
  flush(): Promise<void> {
    if (this.waiting) return this.waiting;
    if (!this.buffer.length) return Promise.resolve();
    let waiting: Promise<void> | undefined = undefined;
    waiting = (async () => {
      await this.deps.settled();
      // a node's events offered to ride with its writes: the ride cuts them (and what came before)
      while (this.offered.size) await this.offersGone;
      if (this.waiting === waiting) this.waiting = undefined;
      if (!this.buffer.length || this.failedOnce) return;
      await this.inTurn(async () => {
        const batch = this.cut();
        if (!batch.length) return;
        // the writes those events report may have started during the wait: settled again
        await this.deps.settled();
        await this.store(batch);
      }).catch(() => undefined);
    })();
    this.waiting = waiting;
    return waiting!;
  }

  /** Every event stored, or the append's error; offers no writes claimed lapse (the stream ended). */
  async drain(): Promise<void> {
    this.closed = true;
    for (const end of [...this.offered.values()]) end();
    while (!this.idle && !(this.failedOnce && !this.cutting && !this.waiting)) {
      if (this.buffer.length && !this.waiting && !this.failedOnce) void this.flush();
      await (this.waiting ?? this.turn);
    }
    if (this.failedOnce) throw this.error;
  }

  /** The drive ended: nobody waits any more. */
  releaseAll(): void {
    this.closed = true;
    for (const end of [...this.offered.values()]) end();
    for (const w of this.waiters.splice(0)) w.resolve();
  }

  /** Writes put with `batch` riding in their statement (or, where it cannot ride, after it). */
  private async ride(batch: EmittedEvent[], put: PutWrites): Promise<void> {
    const rider = batch.length && !this.failedOnce ? this.deps.rider!(batch) : undefined;
    if (!rider) {
      if (batch.length) await this.store(batch);
      return put(undefined);
    }
    try {
      await put(rider);
    } catch (e) {
      // nothing of the statement committed: as a failed append, the drive stops
      this.fail(e);
      throw e;
    }
    const numbered = rider.numbered();
    if (numbered) return this.stored(batch, numbered);
    // the run row was not as this process left it: nothing was written; events first, then the writes
    await this.store(batch);
    await put(undefined);
  }

  private cut(): EmittedEvent[] {
    const batch = this.buffer;
    this.buffer = [];
    return batch;
  }

  private inTurn(fn: () => Promise<void>): Promise<void> {
    this.cutting++;
    const run = this.turn.then(fn).finally(() => {
      this.cutting--;
      if (this.buffer.length && !this.failedOnce) void this.flush();
    });
    this.turn = run.catch(() => undefined);
    return run;
  }

  private async store(batch: EmittedEvent[]): Promise<void> {
    // after a failure nothing more is stored: the next drive emits what this one could not store
    if (this.failedOnce) throw this.error;
    let numbered: RunEvent[];
    try {
      numbered = await this.deps.append(batch);
    } catch (e) {
      this.fail(e);
      throw e;
    }
    this.stored(batch, numbered);
  }

  /** A batch could not be stored: the drive stops (its waiters are released, nothing more is stored). */
  private fail(e: unknown): void {
    if (!this.failedOnce) {
      this.failedOnce = true;
      this.error = e;
      this.deps.failed(e);
    }
    for (const w of this.waiters.splice(0)) w.reject(this.error);
  }

  private stored(batch: EmittedEvent[], numbered: RunEvent[]): void {
    for (const ev of batch) this.persisted.add(ev.key);
    this.waiters = this.waiters.filter((w) => {
      for (const k of w.left) if (this.persisted.has(k)) w.left.delete(k);
      if (!w.left.size) w.resolve();
      return w.left.size > 0;
    });
    this.deps.stored(numbered);
  }
}
