/**
 * The run history contract: runs, step runs, the event log, leases and recorded decisions.
 * Two implementations keep it: MemoryRunStore (tests, library default) and PgRunStore.
 */
import type { TraceCarrier } from "../telemetry/trace-context.js";
import type { Decision } from "../kernel/decision.js";
import type { PendingConfirmation } from "../kernel/pending.js";
import type { Acting, Actor, Via } from "../kernel/actor.js";
import type { Admission } from "../plan/admission.js";
import type { EmittedEvent, RunEvent } from "../kernel/events.js";
import type { RunStatus } from "../kernel/status.js";
import type { ToolChainPlan } from "../plan/schema.js";
import type { RunView } from "../kernel/run-view.js";
import { ErrorCode, ToolchainError, type StepError } from "../kernel/errors.js";
import type { EventLog } from "./event-log.js";
import type { IntentLog } from "./intent-log.js";
import type { StatementRider } from "./statement-rider.js";

export type { IntentLog } from "./intent-log.js";

/** What the planner node needs to plan a run started from a request (kept so any worker can plan it). */
export interface RunPlanningInput {
  request: string;
  /** Skills the planner may use (resolved allowlist); null: every registered skill. */
  allowedSkills: string[] | null;
}

export interface NewRun {
  runId: string;
  workspaceId: string;
  traceId: string;
  /** The context the run's drives continue (src/telemetry/run-spans.ts); absent: recorded with tracing off. */
  traceContext?: TraceCarrier;
  /** For a run started from a request: `{ goal: request, steps: [] }` until the planner writes it. */
  plan: ToolChainPlan;
  context: unknown;
  memory: Record<string, unknown>;
  planningInput?: RunPlanningInput;
  /** Who wrote the plan and what admission changed (src/plan/admission.ts). */
  admission?: Admission;
}

export interface RunRow {
  runId: string;
  workspaceId: string;
  traceId: string;
  traceContext?: TraceCarrier | null;
  status: RunStatus;
  plan: ToolChainPlan;
  context: unknown;
  memory: Record<string, unknown>;
  pendingConfirmations: PendingConfirmation[];
  leaseOwner: string | null;
  leaseExpiresAt: Date | null;
  lastSeq: number;
  checkpointPruned: boolean;
  /** Present for runs started from a request. */
  planningInput?: RunPlanningInput | null;
  /** The run's error as stored (set by the final sync, or by a drive that failed for good). */
  error: StepError | null;
  /** A durable cancel request (first one wins), picked up by whichever process executes the run. */
  cancelRequest: CancelRequest | null;
  /** Consecutive drives of this run that threw (reset by a drive that ends normally). */
  driveFailures: number;
  /** Who wrote the plan (null: a run recorded before provenance existed). */
  admission: Admission | null;
  /** When the run was recorded (ISO). */
  createdAt: string;
}

export interface CancelRequest {
  reason: string;
  at: string;
  /** Who asked (absent on runs cancelled before principals were recorded). */
  by?: Actor;
  via?: Via;
}

/** How often a run whose drive throws is driven again, and how long to wait in between. */
export interface DriveRetryPolicy {
  /** After this many consecutive failures the run is `failed` (DRIVE_FAILED). @default 5 */
  maxFailures: number;
  /** Backoff before the n-th re-drive: initialMs * 2^(n-1), at most maxMs. @default 1000 */
  initialMs: number;
  /** @default 60000 */
  maxMs: number;
}
export const DEFAULT_DRIVE_RETRY: DriveRetryPolicy = { maxFailures: 5, initialMs: 1_000, maxMs: 60_000 };

export function driveBackoffMs(p: DriveRetryPolicy, failures: number): number {
  return Math.min(p.maxMs, p.initialMs * 2 ** Math.max(0, failures - 1));
}

export interface DriveFailureOutcome {
  failures: number;
  /** The run is now `failed` and will not be driven again. */
  final: boolean;
  /** When it may be driven again (not final). */
  retryInMs: number;
}

/** The run's error once its drive failed for good. */
export function driveFailedError(cause: StepError, failures: number, permanent: boolean): StepError {
  const why = permanent ? "a permanent error" : `${failures} consecutive failed attempts`;
  return {
    code: ErrorCode.DRIVE_FAILED,
    message: `the run could not be executed or persisted (${why}): ${cause.message}`,
    details: { cause, failures },
  };
}

/** Requests for a running drive, read on every decision poll (one round trip). */
export interface ControlRequests {
  cancel: CancelRequest | null;
  decisions: { stepId: string; round: number; decision: Decision }[];
}

export type RecordDecisionResult = "recorded" | "duplicate" | "conflict";

/** A run in a listing (no plan body: listings stay small). */
export interface RunSummary {
  runId: string;
  status: RunStatus;
  traceId: string;
  planId: string | null;
  goal: string | null;
  stepCount: number;
  createdAt: string;
  updatedAt: string;
  finishedAt: string | null;
}

export interface ListRunsQuery {
  workspaceId: string;
  /** Only runs in one of these statuses. */
  statuses?: readonly RunStatus[];
  /** 1..1000 */
  limit: number;
  /** From a previous page's `nextCursor`. */
  cursor?: string;
}

export interface RunPage {
  runs: RunSummary[];
  /** Opaque; absent on the last page. */
  nextCursor: string | null;
}

/** What changed a run, told to in-process watchers after the change committed. */
export interface RunChange {
  runId: string;
  /** Newly appended events (empty for a projection sync at the end of a drive). */
  events: readonly RunEvent[];
}
export type RunChangeListener = (change: RunChange) => void;

/**
 * Keyset cursor over (created_at, run_id), newest first. `t` is the creation time in
 * microseconds since the epoch (Postgres keeps microseconds; a millisecond cursor would skip or
 * repeat runs created within one millisecond).
 */
export function encodeRunCursor(t: bigint | number | string, runId: string): string {
  return Buffer.from(JSON.stringify([String(t), runId])).toString("base64url");
}
/** Microseconds since 1970 of year ~5138: far beyond any run, far within what Postgres intervals and timestamps hold. */
const MAX_CURSOR_US = 10n ** 17n;

export function decodeRunCursor(cursor: string): { t: string; runId: string } {
  try {
    const v = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as unknown;
    // the time (microseconds) becomes a timestamp in SQL: an absurd one would fail there, not here
    if (
      Array.isArray(v) &&
      v.length === 2 &&
      typeof v[0] === "string" &&
      /^\d{1,18}$/.test(v[0]) &&
      BigInt(v[0]) <= MAX_CURSOR_US &&
      typeof v[1] === "string" &&
      v[1].length <= 200 &&
      !v[1].includes("\u0000")
    ) {
      return { t: v[0], runId: v[1] };
    }
  } catch {
    // fall through
  }
  throw new ToolchainError(ErrorCode.INVALID_QUERY, "cursor is not one this server returned");
}

export class LeaseLostError extends Error {
  constructor(
    readonly runId: string,
    readonly owner: string,
  ) {
    super(`lease on run ${runId} is no longer held by ${owner}`);
    this.name = "LeaseLostError";
  }
}

/** A wait past its approval deadline (src/runtime/expiry.ts). */
export interface ExpiredWait {
  runId: string;
  stepId: string;
  round: number;
  expiresAt: string;
  onExpiry: "reject" | "leave";
}
/** rejected: the runtime rejected it; left: it stays waiting (reported); decided: a decision was there first. */
export type ExpiryOutcome = "rejected" | "left" | "decided";

export interface NewRunLease {
  owner: string;
  ttlMs: number;
}

export interface SyncOptions {
  releaseLease?: boolean;
}

/** An append riding in another statement: the events as numbered once it committed, undefined when its condition failed (nothing written). */
export interface AppendRider extends StatementRider {
  guard: string;
  numbered(): RunEvent[] | undefined;
}

export interface RunStore extends EventLog, IntentLog {
  /**
   * Records a new run. With `lease`, the run is recorded leased to `lease.owner` (the process
   * that creates it drives it at once) and its row is answered, as `takeLease` would: one round
   * trip instead of two.
   */
  createRun(run: NewRun, lease?: NewRunLease): Promise<RunRow | undefined>;
  getRow(runId: string): Promise<RunRow | undefined>;
  /** Appends (numbering, dedupe by key) and updates the step/run projection in one transaction. Fenced by the lease when `owner` is given. */
  append(runId: string, events: readonly EmittedEvent[], owner?: string): Promise<RunEvent[]>;
  /**
   * Authoritative projection from graph state, written when a drive ends. With `releaseLease`
   * the owner's lease is released by the same statement (a drive with nothing left to do after
   * it: one round trip instead of two).
   */
  sync(view: RunView, owner?: string, opts?: SyncOptions): Promise<void>;
  /**
   * `sync` with the lease released, as a write riding in the run's final checkpoint statement
   * (src/runtime/final-ride.ts); absent where the store and the saver share no database.
   */
  syncRider?(view: RunView, owner: string): StatementRider | undefined;
  /**
   * `append` of a drive's fresh events as a write riding in a node's writes statement
   * (src/runtime/events-ride.ts); undefined where it needs a statement of its own (the drive then
   * appends first), absent where the store and the saver share no database.
   */
  appendRider?(runId: string, events: readonly EmittedEvent[], owner: string): AppendRider | undefined;
  /** The stored view (works after checkpoints were pruned). */
  getView(runId: string): Promise<RunView | undefined>;
  acquireLease(runId: string, owner: string, ttlMs: number): Promise<boolean>;
  /** acquireLease, answering the run row as the lease was taken (undefined: another owner holds it). */
  takeLease(runId: string, owner: string, ttlMs: number): Promise<RunRow | undefined>;
  /** Renew every lease `owner` holds of these runs, in one write; answers the runs still held. */
  renewLeases(runIds: readonly string[], owner: string, ttlMs: number): Promise<Set<string>>;
  releaseLease(runId: string, owner: string): Promise<void>;
  /**
   * Runs that need an executor: queued, active with an expired lease, or suspended with a decision
   * or a cancel to apply; never one backing off after a failed drive. Fair across workspaces (the
   * oldest run of each workspace first, then the second oldest of each, ...). Claims up to `limit`.
   */
  claimRunnable(owner: string, ttlMs: number, limit: number): Promise<string[]>;
  /** Record a cancel request (the first reason wins); no-op on a run that cannot change any more. */
  requestCancel(runId: string, reason: string, acting?: Acting): Promise<void>;
  /**
   * The cancel requests and unapplied decisions of these runs, in one read (the executing
   * process's poll, src/runtime/control-poll.ts): only the runs that have either are answered.
   */
  controlRequests(runIds: readonly string[]): Promise<Map<string, ControlRequests>>;
  /**
   * A drive of the run threw with `error` (not a lost lease): count it and back off, or, after
   * `policy.maxFailures` consecutive failures or when `permanent`, fail the run for good
   * (status `failed`, error DRIVE_FAILED naming the cause, no pending confirmations).
   * Only while `owner` holds the lease (or nobody does).
   */
  recordDriveFailure(
    runId: string,
    owner: string,
    error: StepError,
    policy: DriveRetryPolicy,
    permanent: boolean,
  ): Promise<DriveFailureOutcome | undefined>;
  /** At most one decision per (run, step, round): concurrent duplicates resolve to one. */
  recordDecision(runId: string, stepId: string, round: number, d: Decision): Promise<RecordDecisionResult>;
  getDecision(runId: string, stepId: string, round: number): Promise<Decision | undefined>;
  /**
   * One principal's vote toward a quorum (its `by` names the principal): at most one per (run,
   * step, round, principal); an exact repeat is a duplicate, a different one a conflict.
   * Returns the votes of that wait so far, oldest first.
   */
  recordApproval(
    runId: string,
    stepId: string,
    round: number,
    d: Decision,
  ): Promise<{ result: RecordDecisionResult; votes: Decision[] }>;
  /** The votes recorded for the run's waits, oldest first. */
  listApprovals(runId: string): Promise<{ stepId: string; round: number; decision: Decision }[]>;
  unappliedDecisions(runId: string): Promise<{ stepId: string; round: number; decision: Decision }[]>;
  /**
   * Waits whose approval deadline (`pendingConfirmations[].expiresAt`) is at or before `now` and
   * whose expiry no process has handled yet, soonest first: what the worker loop's expiry sweep applies.
   */
  expiredWaits(now: Date, limit: number): Promise<ExpiredWait[]>;
  /** Record the expiry of a wait as handled (false: it already was, by this or another process). */
  markExpiryHandled(runId: string, stepId: string, round: number, outcome: ExpiryOutcome): Promise<boolean>;
  markApplied(runId: string, keys: { stepId: string; round: number }[]): Promise<void>;
  /**
   * Terminal runs finished before `before` whose checkpoints still exist and that can never be
   * resumed again: nothing pending (a strict rollback waiting for an operator is `rollback_failed`
   * with a pending decision), no lease, no unapplied decision.
   */
  prunable(before: Date, limit: number): Promise<string[]>;
  markPruned(runIds: string[]): Promise<void>;
  /** The workspace's runs, newest first, keyset-paginated on (created_at, run_id). */
  listRuns(q: ListRunsQuery): Promise<RunPage>;
  /** How many runs are in each status (every workspace). */
  countRuns(): Promise<Partial<Record<RunStatus, number>>>;
  /**
   * Watch changes committed through any store on this storage in this process (appends and
   * syncs). Other processes learn of them through src/live (Postgres NOTIFY or Redis).
   */
  onChange(listener: RunChangeListener): () => void;
  /**
   * A string that changes whenever the stored inputs of the run's view change (its row, its step
   * rows, its latest checkpoint), whichever process changed them; undefined when the run does not
   * exist. Optional: a store without it gets no in-process view cache (src/live/view-cache.ts).
   */
  viewVersion?(runId: string): Promise<string | undefined>;
  /**
   * For a database only this process writes (embedded): the run's view version kept in process
   * (bumped by every write of the run, here and through viewChanged). Preferred over viewVersion.
   */
  viewGeneration?: (runId: string) => number;
  /** Something the view is built from changed outside the store (a checkpoint was written). */
  viewChanged?(runId: string): void;
}

/**
 * The plan a `planning_completed` event carries (a plan written by the planner node), with the
 * planner's record: the store writes it into the run row and creates the step rows.
 */
export function plannedBy(
  events: readonly EmittedEvent[],
): { plan: ToolChainPlan; planning: Record<string, unknown> } | undefined {
  const e = events.find((x) => x.type === "planning_completed" && x.data.plan !== undefined);
  if (!e) return undefined;
  const {
    plan,
    planner,
    steps: _steps,
    ...rest
  } = e.data as { plan: ToolChainPlan; planner?: Record<string, unknown>; steps?: number };
  return { plan, planning: { ...planner, ...rest } };
}

/** The principal a vote is counted for. */
export const voterOf = (d: Decision) => (d.by ? `${d.by.kind}:${d.by.id}` : "unknown");

/** Two decisions are the same when they decide, edit and comment alike (the time does not count). */
export function sameDecision(a: Decision, b: Decision): boolean {
  const norm = (d: Decision) =>
    JSON.stringify({
      decision: d.decision,
      arguments: d.arguments ?? null,
      output: d.output ?? null,
      comment: d.comment ?? null,
    });
  return norm(a) === norm(b);
}
