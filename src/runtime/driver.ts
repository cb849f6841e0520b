/**
 * Drives one execution of a run's graph (a start, a resume, a recovery): holds the run's lease
 * while it executes (heartbeat; losing it stops the drive), batches events into the run store
 * (one transaction per batch, numbered there), keeps the live projection, delivers decisions
 * recorded by other processes to the running scheduler, and writes the final projection.
 */
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
import { Command } from "@langchain/langgraph";
import { SEED_KEY, type GraphInput, type RunSeed } from "../../graphs/io.js";
import type { compileToolchainGraph } from "../../graphs/toolchain.js";
import { Channel } from "../kernel/channel.js";
import { EVENT_TAG, isTaggedEvent, type EmittedEvent, type EventType, type RunEvent } from "../kernel/events.js";
import { TERMINAL_RUN } from "../kernel/status.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { fault, FaultPoint } from "../kernel/faults.js";
import { LeaseLostError, type DriveFailureOutcome, type DriveRetryPolicy, type RunStore } from "../store/run-store.js";
import { storableError } from "../kernel/storable.js";
import { toStepError } from "../kernel/errors.js";
import type { RunControls } from "./controls.js";
import { LiveProjection } from "./live-projection.js";
import type { RunView } from "./view.js";

export type Graph = ReturnType<typeof compileToolchainGraph>;

export interface DriveDeps {
  graph: Graph;
  store: RunStore;
  controls: RunControls;
  owner: string;
  leaseTtlMs: number;
  /** How often a running drive looks for decisions recorded by other processes. */
  decisionPollMs: number;
  /** Bounded re-drives of a run whose drive throws. */
  driveRetry: DriveRetryPolicy;
  view(runId: string): Promise<RunView>;
  /** Resolves once the checkpoint writes started for the run so far have settled (write-barrier.ts). */
  writesSettled?(runId: string): Promise<void>;
}

/** A drive that threw, after the failure was recorded against the run (see RunStore.recordDriveFailure). */
export class DriveFailedError extends Error {
  constructor(readonly runId: string, override readonly cause: unknown, readonly outcome: DriveFailureOutcome | undefined) {
    super(`drive of run ${runId} failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "DriveFailedError";
  }
}

export interface Drive {
  runId: string;
  events: Channel<RunEvent>;
  live: LiveProjection;
  /** Resolves once the live projection is seeded. */
  ready: Promise<void>;
  result: Promise<RunView>;
}


/**
 * What a drive feeds the graph: a new run's input with the facts only the runtime sets (its
 * workspace, allowlist, creation time: graphs/io.ts), a resume, or null (continue from the checkpoint).
 */
/**
 * Run `fn` outside the caller's LangChain/LangGraph context. A runtime called from inside a graph
 * node (an agent's tool) would otherwise hand its run's graph the caller's config: its checkpoint
 * namespace, callbacks and stream, so the run's checkpoints and events would land in the agent's.
 */
export function outsideCallerContext<T>(fn: () => Promise<T>): Promise<T> {
  return AsyncLocalStorageProviderSingleton.getInstance().run(undefined, fn) as Promise<T>;
}

export interface DriveInput {
  /** A new run's input, a resume, or null (continue from the checkpoint). */
  input: GraphInput | Command | null;
  seed: RunSeed;
}

export function startDrive(deps: DriveDeps, runId: string, start: DriveInput, done: () => void): Drive {
  const { graph, store, owner, leaseTtlMs } = deps;
  const events = new Channel<RunEvent>();
  const live = new LiveProjection();
  const stop = new AbortController();
  // this drive's live controls (cancel signal, decision inbox): they end with it
  deps.controls.open(runId);
  const cancelFrom = (reason: string) => deps.controls.cancel(runId, new ToolchainError(ErrorCode.CANCELLED, reason || "cancelled by request"));
  let leased = false;
  const ready = (async () => {
    if (!(await store.acquireLease(runId, owner, leaseTtlMs))) {
      throw new ToolchainError(ErrorCode.RUN_NOT_ACTIVE, `run ${runId} is being executed by another process`, { details: { leaseBusy: true } });
    }
    leased = true;
    const row = await store.getRow(runId);
    live.seed(row?.pendingConfirmations ?? []);
    // a cancel recorded before this drive started (queued run, another process, a crash): apply it first
    if (row?.cancelRequest) cancelFrom(row.cancelRequest.reason);
  })();

  // events: batched, one store transaction per batch, in order
  let buffer: EmittedEvent[] = [];
  let flushing: Promise<void> | undefined;
  let flushError: unknown;
  // keys of events this drive's appends committed (stored now, by this batch or an earlier one)
  const persisted = new Set<string>();
  const flush = (): Promise<void> => {
    if (flushing || !buffer.length) return flushing ?? Promise.resolve();
    const batch = buffer;
    buffer = [];
    // never ahead of the checkpoint: a step shown completed has its result saved (write-barrier.ts)
    const written = deps.writesSettled ? deps.writesSettled(runId) : Promise.resolve();
    flushing = written.then(() => store.append(runId, batch, owner)).then(
      (numbered) => {
        fault(FaultPoint.event_batch_appended);
        for (const ev of batch) persisted.add(ev.key);
        for (const ev of numbered) {
          live.apply(ev);
          events.push(ev);
        }
      },
      (e) => {
        flushError ??= e;
        stop.abort(e);
      },
    ).finally(() => {
      flushing = undefined;
      if (buffer.length && !flushError) void flush();
    });
    return flushing;
  };
  const drain = async () => {
    while (flushing || (buffer.length && !flushError)) await (flushing ?? flush());
    if (flushError) throw flushError;
  };

  const result = outsideCallerContext(async () => {
    let heartbeat: NodeJS.Timeout | undefined;
    let poller: NodeJS.Timeout | undefined;
    try {
      await ready;
      heartbeat = setInterval(() => {
        store.renewLease(runId, owner, leaseTtlMs).then(
          (ok) => {
            if (!ok) return stop.abort(new ToolchainError(ErrorCode.RUN_NOT_ACTIVE, `lost the lease on run ${runId}`));
            fault(FaultPoint.lease_renewed);
          },
          () => undefined, // a transient database error: the next beat retries; expiry protects others
        );
      }, Math.max(50, Math.floor(leaseTtlMs / 3)));
      // cancels and decisions recorded by other processes while this one executes the run
      let polling = false;
      poller = setInterval(() => {
        if (polling) return;
        polling = true;
        store.controlRequests(runId).then(
          (req) => {
            if (req.cancel) cancelFrom(req.cancel.reason);
            for (const d of req.decisions) {
              const p = live.pending.get(d.stepId);
              if (!p || (p.round ?? 0) !== d.round) continue; // not this wait: stale, or not waiting yet
              live.pending.delete(d.stepId);
              live.decided.set(d.stepId, d.decision);
              deps.controls.offer(runId, d.stepId, { ...d.decision, round: d.round });
            }
          },
          () => undefined,
        ).finally(() => (polling = false));
      }, deps.decisionPollMs);

      const stream = await graph.stream(start.input as never, {
        configurable: { thread_id: runId, [SEED_KEY]: start.seed },
        streamMode: ["custom"],
        recursionLimit: 1_000_000,
        // a superstep's checkpoint is saved before the next superstep starts: with "async", a
        // process killed early in a superstep could lose the previous checkpoint, and the tasks
        // saved under it (the crash-point suite found completed steps executed again)
        durability: "sync",
        signal: stop.signal,
      });
      for await (const chunk of stream as AsyncIterable<[string, unknown]>) {
        const payload = chunk[1];
        if (!isTaggedEvent(payload)) continue;
        buffer.push(payload[EVENT_TAG]);
        void flush();
      }
      await drain();
      const view = await deps.view(runId);
      // a process that died between a node's checkpoint and the event flush lost those events;
      // the state knows what happened: add what is missing (keys make this a no-op otherwise;
      // what this drive's own appends stored is not asked for again)
      for (const ev of await store.append(runId, backfill(view).filter((e) => !persisted.has(e.key)), owner)) {
        live.apply(ev);
        events.push(ev);
      }
      await store.sync(view, owner);
      fault(FaultPoint.final_sync);
      const waiting = new Set(view.pendingConfirmations.map((p) => `${p.stepId}:${p.round ?? 0}`));
      const unapplied = await store.unappliedDecisions(runId);
      await store.markApplied(runId, unapplied.filter((d) => !waiting.has(`${d.stepId}:${d.round}`)));
      return view;
    } catch (e) {
      await drain().catch(() => undefined);
      const err = flushError ?? e;
      if (!leased || isLeaseLost(err)) throw err;
      // the run itself could not be executed or persisted: count it (bounded re-drives with
      // backoff, then the run fails for good) instead of leaving it for the next poll to retry forever
      const cause = storableError(toStepError(err));
      const outcome = await store.recordDriveFailure(runId, owner, cause, deps.driveRetry, isPermanent(err)).catch(() => undefined);
      if (outcome?.final) {
        const terminal = { type: "run_failed" as const, at: new Date().toISOString(), data: { status: "failed", error: { code: ErrorCode.DRIVE_FAILED, message: cause.message } }, key: "run_failed::" };
        for (const ev of await store.append(runId, [terminal], owner).catch(() => [])) {
          live.apply(ev);
          events.push(ev);
        }
      }
      throw new DriveFailedError(runId, err, outcome);
    } finally {
      clearInterval(heartbeat);
      clearInterval(poller);
      await store.releaseLease(runId, owner).catch(() => undefined);
      deps.controls.close(runId);
      done();
    }
  });
  result.then(
    () => events.close(),
    (e) => {
      if (isLeaseBusy(e)) return events.close(); // someone else executes it: nothing happened here
      events.fail(e);
    },
  );
  return { runId, events, live, ready: ready.catch(() => undefined), result };
}

/** Another process owns the run now: nothing failed here. */
export function isLeaseLost(e: unknown): boolean {
  return e instanceof LeaseLostError || (e as ToolchainError)?.code === ErrorCode.RUN_NOT_ACTIVE;
}

/**
 * Errors that another drive would meet again: Postgres data exceptions (class 22, e.g. 22P05 a NUL
 * in jsonb) and program limits (class 54), and values we refuse to store. Failing at once beats
 * retrying them.
 */
function isPermanent(e: unknown): boolean {
  const code = (e as { code?: unknown })?.code;
  if (code === ErrorCode.UNSUPPORTED_VALUE) return true;
  return typeof code === "string" && /^(22|54)[0-9A-Z]{3}$/.test(code);
}

export function isLeaseBusy(e: unknown): boolean {
  return (e as ToolchainError)?.code === ErrorCode.RUN_NOT_ACTIVE && ((e as ToolchainError).details as { leaseBusy?: boolean } | undefined)?.leaseBusy === true;
}

const TERMINAL_EVENT: Partial<Record<string, EventType>> = {
  completed: "step_completed",
  rolled_back: "step_completed",
  rollback_failed: "step_completed",
  failed: "step_failed",
  skipped: "step_skipped",
  cancelled: "step_cancelled",
};

/** The lifecycle events a settled view implies, with the keys the nodes use for them. */
export function backfill(view: RunView): EmittedEvent[] {
  const at = view.updatedAt;
  const out: EmittedEvent[] = [{ type: "planning_started", at: view.createdAt, data: { backfilled: true }, key: "planning_started::" }];
  if (view.steps.some((s) => s.status !== "pending")) out.push({ type: "planning_completed", at: view.createdAt, data: { backfilled: true }, key: "planning_completed::" });
  for (const s of view.steps) {
    const type = TERMINAL_EVENT[s.status];
    if (!type) continue;
    out.push({ type, stepId: s.stepId, at: s.finishedAt ?? at, data: { backfilled: true, ...(s.error ? { error: s.error } : {}) }, key: `${type}:${s.stepId}:` });
  }
  if (view.status === "completed") out.push({ type: "run_completed", at, data: { status: view.status, backfilled: true }, key: "run_completed::" });
  else if (TERMINAL_RUN.has(view.status)) out.push({ type: "run_failed", at, data: { status: view.status, error: view.error, backfilled: true }, key: "run_failed::" });
  return out;
}
