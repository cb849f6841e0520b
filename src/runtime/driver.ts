/**
 * Drives one execution of a run's graph (a start, a resume, a recovery): holds the run's lease
 * while it executes (heartbeat; losing it stops the drive), batches events into the run store
 * (one transaction per batch, numbered there), keeps the live projection, delivers decisions
 * recorded by other processes to the running scheduler, and writes the final projection.
 */
import { setMaxListeners } from "node:events";
import { Command } from "@langchain/langgraph";
import type { RunState } from "../../graphs/state.js";
import type { compileToolchainGraph } from "../../graphs/toolchain.js";
import { Channel } from "../kernel/channel.js";
import { EVENT_TAG, isTaggedEvent, type EmittedEvent, type EventType, type RunEvent } from "../kernel/events.js";
import { TERMINAL_RUN } from "../kernel/status.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { fault, FaultPoint } from "../kernel/faults.js";
import type { RunStore } from "../store/run-store.js";
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
  view(runId: string): Promise<RunView>;
  onError?(runId: string, e: unknown): void;
}

export interface Drive {
  runId: string;
  events: Channel<RunEvent>;
  live: LiveProjection;
  /** Resolves once the live projection is seeded. */
  ready: Promise<void>;
  result: Promise<RunView>;
}


export function startDrive(deps: DriveDeps, runId: string, input: Partial<RunState> | Command | null, done: () => void): Drive {
  const { graph, store, owner, leaseTtlMs } = deps;
  const events = new Channel<RunEvent>();
  const live = new LiveProjection();
  const stop = new AbortController();
  // LangGraph adds one abort listener per running task to the run's signal: not a leak
  setMaxListeners(0, stop.signal);
  const ready = (async () => {
    if (!(await store.acquireLease(runId, owner, leaseTtlMs))) {
      throw new ToolchainError(ErrorCode.RUN_NOT_ACTIVE, `run ${runId} is being executed by another process`, { details: { leaseBusy: true } });
    }
    const row = await store.getRow(runId);
    live.seed(row?.pendingConfirmations ?? []);
  })();

  // events: batched, one store transaction per batch, in order
  let buffer: EmittedEvent[] = [];
  let flushing: Promise<void> | undefined;
  let flushError: unknown;
  const flush = (): Promise<void> => {
    if (flushing || !buffer.length) return flushing ?? Promise.resolve();
    const batch = buffer;
    buffer = [];
    flushing = store.append(runId, batch, owner).then(
      (numbered) => {
        fault(FaultPoint.event_batch_appended);
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

  const result = (async () => {
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
      // decisions recorded by another process while this one executes the run
      poller = setInterval(() => {
        if (!live.pending.size) return;
        store.unappliedDecisions(runId).then(
          (ds) => {
            for (const d of ds) {
              const p = live.pending.get(d.stepId);
              if (!p || (p.round ?? 0) !== d.round) continue; // not this wait: stale, or not waiting yet
              live.pending.delete(d.stepId);
              live.decided.set(d.stepId, d.decision);
              deps.controls.offer(runId, d.stepId, { ...d.decision, round: d.round });
            }
          },
          () => undefined,
        );
      }, deps.decisionPollMs);

      const stream = await graph.stream(input as never, {
        configurable: { thread_id: runId },
        streamMode: ["custom"],
        recursionLimit: 1_000_000,
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
      // the state knows what happened: add what is missing (keys make this a no-op otherwise)
      for (const ev of await store.append(runId, backfill(view), owner)) {
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
      throw flushError ?? e;
    } finally {
      clearInterval(heartbeat);
      clearInterval(poller);
      await store.releaseLease(runId, owner).catch(() => undefined);
      done();
    }
  })();
  result.then(
    () => events.close(),
    (e) => {
      if (isLeaseBusy(e)) return events.close(); // someone else executes it: nothing happened here
      deps.onError?.(runId, e);
      events.fail(e);
    },
  );
  return { runId, events, live, ready: ready.catch(() => undefined), result };
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
