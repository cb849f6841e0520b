/**
 * Drives one execution of a run's graph (a start, a resume, a recovery): holds the run's lease
 * while it executes (heartbeat; losing it stops the drive), batches events into the run store
 * (one transaction per batch, numbered there), keeps the live projection, delivers decisions
 * recorded by other processes to the running scheduler, and writes the final projection.
 */
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
import { Command } from "@langchain/langgraph";
import { SEED_KEY, type GraphInput, type RunSeed } from "../../graphs/io.js";
import { freshThreadKey } from "./fresh-thread.js";
import { finalRideKey, type FinalRide } from "./final-ride.js";
import { eventsRideKey } from "./events-ride.js";
import { EventBatches } from "./event-batches.js";
import type { compileToolchainGraph } from "../../graphs/toolchain.js";
import { Channel } from "../kernel/channel.js";
import { EVENT_TAG, isTaggedEvent, type EmittedEvent, type RunEvent } from "../kernel/events.js";
import { backfill, sameAsCheckpoint } from "./backfill.js";
import { cancelError, ErrorCode, ToolchainError } from "../kernel/errors.js";
import {
  LeaseLostError,
  type CancelRequest,
  type DriveFailureOutcome,
  type DriveRetryPolicy,
  type RunStore,
} from "../store/run-store.js";
import { storableError } from "../kernel/storable.js";
import { toStepError } from "../kernel/errors.js";
import type { RunControls } from "../kernel/controls.js";
import { LiveProjection } from "./live-projection.js";
import type { RunView } from "../kernel/run-view.js";
import { eventKey } from "../kernel/events.js";
import type { VersionGap } from "../skills/version.js";
import { context } from "@opentelemetry/api";
import { inContext } from "../telemetry/tracing.js";
import { NO_DRIVE_TRACE, startDriveTrace, workflowName, type DriveTrace } from "../telemetry/run-spans.js";
import { emitRuntimeSignal } from "../telemetry/signals.js";
import { logger } from "../telemetry/log.js";
import type { RunRow } from "../store/run-store.js";
import type { ControlPoll } from "./control-poll.js";
import type { LeaseKeeper } from "./lease-keeper.js";

export type Graph = ReturnType<typeof compileToolchainGraph>;

export interface DriveDeps {
  graph: Graph;
  store: RunStore;
  controls: RunControls;
  owner: string;
  leaseTtlMs: number;
  /** Where a running drive learns of cancels and decisions recorded by other processes. */
  controlPoll: ControlPoll;
  /** Renews the leases of every run this process drives, in one statement per beat. */
  leases: LeaseKeeper;
  /** Bounded re-drives of a run whose drive throws. */
  driveRetry: DriveRetryPolicy;
  /** The run's view from its checkpoint. */
  view(runId: string): Promise<RunView>;
  /**
   * The same view from the state a drive streamed last, when that state is a run that ended
   * (terminal); undefined otherwise (no checkpoint read either way).
   */
  viewOf(values: unknown): Promise<RunView | undefined>;
  /** Resolves once the task and node writes started for the run so far have settled (write-barrier.ts). */
  writesSettled?(runId: string): Promise<void>;
  /**
   * Pinned skill versions (src/skills/version.ts), checked with the lease held: `leave` when this
   * process lacks one (the run stays for a process that has it), `unavailable` after the grace period.
   */
  versionGate?(runId: string): Promise<VersionGate | undefined>;
  /** The saver's node writes can carry the node's events (events-ride.ts). */
  eventsRide?: boolean;
  /** A new run's first drive: its thread has no checkpoint to read (fresh-thread.ts). */
  freshThread?: boolean;
  /** The saver's checkpoints can carry the run's final projection (final-ride.ts). */
  finalRide?: boolean;
}

export type VersionGate = { leave: VersionGap } | { unavailable: VersionGap };

/** A drive that threw, after the failure was recorded against the run (see RunStore.recordDriveFailure). */
export class DriveFailedError extends Error {
  constructor(
    readonly runId: string,
    override readonly cause: unknown,
    readonly outcome: DriveFailureOutcome | undefined,
  ) {
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
  const cancelFrom = (req: CancelRequest) => deps.controls.cancel(runId, cancelError(req.reason, req));
  let leased = false;
  // the final projection rode in the run's final checkpoint (final-ride.ts)
  let ridden: RunView | undefined;
  // the final sync released the lease (nothing to release at the end)
  let released = false;
  // what started this drive (a confirm request, a worker's poll): the drive's span links to it
  const trigger = context.active();
  let row: RunRow | undefined;
  // whether the run waited for a decision at any time of this drive: only then can a decision
  // (recorded only for a waiting step) be left for it to mark applied at its end
  let waited = false;
  const applyLive = (ev: RunEvent) => {
    live.apply(ev);
    waited ||= live.pending.size > 0;
  };
  const ready = (async () => {
    row = await store.takeLease(runId, owner, leaseTtlMs);
    if (!row) {
      throw new ToolchainError(ErrorCode.RUN_NOT_ACTIVE, `run ${runId} is being executed by another process`, {
        details: { leaseBusy: true },
      });
    }
    leased = true;
    live.seed(row.pendingConfirmations);
    waited = row.pendingConfirmations.length > 0;
    // a cancel recorded before this drive started (queued run, another process, a crash): apply it first
    if (row?.cancelRequest) cancelFrom(row.cancelRequest);
  })();

  // events: batched, one store statement per batch, in order (event-batches.ts)
  const batches = new EventBatches({
    settled: () => (deps.writesSettled ? deps.writesSettled(runId) : Promise.resolve()),
    append: (batch) => store.append(runId, batch, owner),
    ...(deps.eventsRide && store.appendRider
      ? { rider: (batch: EmittedEvent[]) => store.appendRider?.(runId, batch, owner) }
      : {}),
    stored: (numbered) => {
      spans.observe(numbered);
      for (const ev of numbered) {
        applyLive(ev);
        events.push(ev);
      }
    },
    failed: (e) => stop.abort(e),
  });
  const persisted = batches.persisted;
  deps.controls.setEventLog(runId, (keys) => batches.whenStored(keys));
  // events are taken while the graph streams: what a node still emits after the stream ended or
  // failed (a skill that ignored its abort) is dropped, as a custom chunk of a closed stream was
  let streaming = false;
  const take = (ev: EmittedEvent) => {
    if (streaming) batches.push(ev);
  };
  deps.controls.setEventSink(runId, take);
  const drain = () => batches.drain();

  // the drive's `invoke_workflow` span (src/telemetry/run-spans.ts; a no-op with tracing off)
  let spans: DriveTrace = NO_DRIVE_TRACE;
  const result = outsideCallerContext(async () => {
    let unhold = (): void => undefined;
    let unwatch = (): void => undefined;
    try {
      await ready;
      // a new run's input has nothing pinned yet (its planner node pins the versions)
      const resumed = start.input === null || start.input instanceof Command;
      const gate = resumed ? await deps.versionGate?.(runId) : undefined;
      if (gate && "leave" in gate) return { ...(await deps.view(runId)), waitingFor: { skillVersion: gate.leave } };
      if (gate) start = { ...start, seed: { ...start.seed, versionUnavailable: gate.unavailable } };
      spans = startDriveTrace({
        runId,
        workspaceId: row?.workspaceId ?? "",
        traceId: row?.traceId ?? "",
        traceContext: row?.traceContext,
        name: workflowName(row?.plan),
        owner,
        trigger,
        waitOf: async (e) => {
          const w = (await store.list(runId))
            .filter((x) => x.type === "step_waiting_confirmation" && x.stepId === e.stepId && x.seq < e.seq)
            .at(-1);
          return w
            ? { at: w.at, skillName: typeof w.data.skillName === "string" ? w.data.skillName : undefined }
            : undefined;
        },
      });
      deps.controls.setTraceContext(runId, spans.ctx);
      unhold = deps.leases.hold(runId, () =>
        stop.abort(new ToolchainError(ErrorCode.RUN_NOT_ACTIVE, `lost the lease on run ${runId}`)),
      );
      // cancels and decisions recorded by other processes while this one executes the run
      unwatch = deps.controlPoll.watch(runId, (req) => {
        if (req.cancel) cancelFrom(req.cancel);
        for (const d of req.decisions) {
          const p = live.pending.get(d.stepId);
          if (!p || (p.round ?? 0) !== d.round) continue; // not this wait: stale, or not waiting yet
          live.pending.delete(d.stepId);
          live.decided.set(d.stepId, d.decision);
          deps.controls.offer(runId, d.stepId, { ...d.decision, round: d.round });
        }
      });

      // the run's final projection in its final checkpoint's statement (final-ride.ts): only when
      // nothing is left for this drive after it, as for the sync that releases the lease below
      const ride: FinalRide | undefined =
        deps.finalRide && store.syncRider && !(start.input instanceof Command)
          ? async (values) => {
              if (ridden || waited || batches.failure) return undefined;
              const view = await deps.viewOf(values);
              if (!view || view.pendingConfirmations.length) return undefined;
              // the run's last events (riding in its last node's writes, or batches) are stored first
              if (!(await batches.storedAll())) return undefined;
              if (backfill(view).some((e) => !persisted.has(e.key))) return undefined;
              const rider = store.syncRider?.(view, owner);
              return (
                rider && {
                  ...rider,
                  committed: (row) => {
                    rider.committed(row);
                    ridden = view;
                    released = true;
                    unhold();
                    unwatch();
                  },
                }
              );
            }
          : undefined;
      // the graph starts executing (and its nodes emitting) as soon as the stream is made
      streaming = true;
      const stream = await inContext(spans.ctx, () =>
        graph.stream(start.input as never, {
          configurable: {
            thread_id: runId,
            [SEED_KEY]: start.seed,
            ...freshThreadKey(deps.freshThread),
            ...finalRideKey(ride),
            ...eventsRideKey(deps.eventsRide && store.appendRider ? batches : undefined),
          },
          // "values": the state after each superstep, so the drive's end needs no checkpoint read
          streamMode: ["custom", "values"],
          recursionLimit: 1_000_000,
          // a superstep's checkpoint is saved before the next superstep starts: with "async", a
          // process killed early in a superstep could lose the previous checkpoint, and the tasks
          // saved under it (the crash-point suite found completed steps executed again)
          durability: "sync",
          signal: stop.signal,
        }),
      );
      let last: unknown;
      try {
        for await (const chunk of stream as AsyncIterable<[string, unknown]>) {
          const payload = chunk[1];
          if (chunk[0] === "values") {
            last = payload;
            continue;
          }
          // the nodes' events come through the sink; a custom chunk is one written past it
          if (isTaggedEvent(payload)) take(payload[EVENT_TAG]);
        }
      } finally {
        streaming = false;
      }
      await drain();
      // a run that ended (terminal) ended in the superstep whose state was streamed last: that state
      // is its checkpoint's. Otherwise (an interrupt: the checkpoint's view also shows the writes its
      // finished tasks saved) the checkpoint is read.
      const streamed = last !== undefined ? await deps.viewOf(last) : undefined;
      const view = streamed ?? (await deps.view(runId));
      if (streamed && process.env.TOOLCHAIN_CHECK_STREAMED_VIEW === "1") {
        await sameAsCheckpoint(streamed, await deps.view(runId));
        if (ridden) await sameAsCheckpoint(ridden, streamed);
      }
      // the projection that rode is this view's (else the sync below writes it)
      const rode = ridden !== undefined && JSON.stringify(ridden) === JSON.stringify(view);
      // a process that died between a node's checkpoint and the event flush lost those events;
      // the state knows what happened: add what is missing (keys make this a no-op otherwise;
      // what this drive's own appends stored is not asked for again)
      for (const ev of await store.append(
        runId,
        backfill(view).filter((e) => !persisted.has(e.key)),
        owner,
      )) {
        applyLive(ev);
        events.push(ev);
      }
      const waiting = new Set(view.pendingConfirmations.map((p) => `${p.stepId}:${p.round ?? 0}`));
      const marks = waited || waiting.size > 0 || start.input instanceof Command;
      if (!marks) {
        // nothing left for this drive after its sync: the sync releases the lease (one statement)
        unhold();
        unwatch();
        if (!rode) await store.sync(view, owner, { releaseLease: true });
        released = true;
      } else await store.sync(view, owner);
      await spans.end({ status: view.status, error: view.error, waiting: view.pendingConfirmations.length });
      if (marks) {
        const unapplied = await store.unappliedDecisions(runId);
        await store.markApplied(
          runId,
          unapplied.filter((d) => !waiting.has(`${d.stepId}:${d.round}`)),
        );
      }
      return view;
    } catch (e) {
      await drain().catch(() => undefined);
      const err = batches.failure ?? e;
      if (leased) await spans.fail(err);
      const line = { runId, workspace: row?.workspaceId, traceId: row?.traceId };
      if (leased && isLeaseLost(err)) {
        emitRuntimeSignal({ kind: "lease_lost", runId });
        logger().warn(line, `lost the lease on run ${runId}: another process executes it now`);
      }
      if (!leased || isLeaseLost(err)) throw err;
      // the run itself could not be executed or persisted: count it (bounded re-drives with
      // backoff, then the run fails for good) instead of leaving it for the next poll to retry forever
      const cause = storableError(toStepError(err));
      const outcome = await store
        .recordDriveFailure(runId, owner, cause, deps.driveRetry, isPermanent(err))
        .catch(() => undefined);
      emitRuntimeSignal({ kind: "drive_failed", runId, final: outcome?.final ?? false, code: cause.code });
      logger()[outcome?.final ? "error" : "warn"](
        { ...line, error: { code: cause.code, message: cause.message }, final: outcome?.final ?? false },
        `drive of run ${runId} failed`,
      );
      if (outcome?.final) {
        const terminal = {
          type: "run_failed" as const,
          at: new Date().toISOString(),
          data: { status: "failed", error: { code: ErrorCode.DRIVE_FAILED, message: cause.message } },
          // a key of its own: `run_failed::` is the run's own end (graphs/finish.ts; an earlier end of this run, say a
          // strict rollback waiting for its operator, must not make the append drop this one)
          key: eventKey("run_failed", undefined, `drive_failed${outcome.failures}`, 0),
        };
        for (const ev of await store.append(runId, [terminal], owner).catch(() => [])) {
          applyLive(ev);
          events.push(ev);
        }
      }
      throw new DriveFailedError(runId, err, outcome);
    } finally {
      streaming = false;
      unhold();
      unwatch();
      batches.releaseAll();
      if (!released) await store.releaseLease(runId, owner).catch(() => undefined);
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
  return (
    (e as ToolchainError)?.code === ErrorCode.RUN_NOT_ACTIVE &&
    ((e as ToolchainError).details as { leaseBusy?: boolean } | undefined)?.leaseBusy === true
  );
}
