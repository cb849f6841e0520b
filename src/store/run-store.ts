/**
 * The run history contract: runs, step runs, the event log, leases and recorded decisions.
 * Two implementations keep it: MemoryRunStore (tests, library default) and PgRunStore.
 */
import type { Decision } from "../../graphs/state.js";
import type { PendingConfirmation } from "../../graphs/approval-node.js";
import type { EmittedEvent, RunEvent } from "../kernel/events.js";
import type { RunStatus } from "../kernel/status.js";
import type { ToolChainPlan } from "../plan/schema.js";
import type { RunView } from "../runtime/view.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import type { EventLog } from "./event-log.js";
import type { IntentLog } from "./intent-log.js";

export type { IntentLog } from "./intent-log.js";

export interface NewRun {
  runId: string;
  workspaceId: string;
  traceId: string;
  plan: ToolChainPlan;
  context: unknown;
  memory: Record<string, unknown>;
}

export interface RunRow {
  runId: string;
  workspaceId: string;
  traceId: string;
  status: RunStatus;
  plan: ToolChainPlan;
  context: unknown;
  memory: Record<string, unknown>;
  pendingConfirmations: PendingConfirmation[];
  leaseOwner: string | null;
  leaseExpiresAt: Date | null;
  lastSeq: number;
  checkpointPruned: boolean;
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
    if (Array.isArray(v) && v.length === 2 && typeof v[0] === "string" && /^\d{1,18}$/.test(v[0]) && BigInt(v[0]) <= MAX_CURSOR_US && typeof v[1] === "string" && v[1].length <= 200 && !v[1].includes("\u0000")) {
      return { t: v[0], runId: v[1] };
    }
  } catch {
    // fall through
  }
  throw new ToolchainError(ErrorCode.INVALID_QUERY, "cursor is not one this server returned");
}

export class LeaseLostError extends Error {
  constructor(readonly runId: string, readonly owner: string) {
    super(`lease on run ${runId} is no longer held by ${owner}`);
    this.name = "LeaseLostError";
  }
}

export interface RunStore extends EventLog, IntentLog {
  createRun(run: NewRun): Promise<void>;
  getRow(runId: string): Promise<RunRow | undefined>;
  /** Appends (numbering, dedupe by key) and updates the step/run projection in one transaction. Fenced by the lease when `owner` is given. */
  append(runId: string, events: readonly EmittedEvent[], owner?: string): Promise<RunEvent[]>;
  /** Authoritative projection from graph state, written when a drive ends. */
  sync(view: RunView, owner?: string): Promise<void>;
  /** The stored view (works after checkpoints were pruned). */
  getView(runId: string): Promise<RunView | undefined>;
  acquireLease(runId: string, owner: string, ttlMs: number): Promise<boolean>;
  renewLease(runId: string, owner: string, ttlMs: number): Promise<boolean>;
  releaseLease(runId: string, owner: string): Promise<void>;
  /** Runs that need an executor: queued, or active with an expired lease. Claims up to `limit`. */
  claimRunnable(owner: string, ttlMs: number, limit: number): Promise<string[]>;
  /** At most one decision per (run, step, round): concurrent duplicates resolve to one. */
  recordDecision(runId: string, stepId: string, round: number, d: Decision): Promise<RecordDecisionResult>;
  getDecision(runId: string, stepId: string, round: number): Promise<Decision | undefined>;
  unappliedDecisions(runId: string): Promise<{ stepId: string; round: number; decision: Decision }[]>;
  markApplied(runId: string, keys: { stepId: string; round: number }[]): Promise<void>;
  /** Terminal runs finished before `before` whose checkpoints still exist. */
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
}

/** Two decisions are the same when they decide, edit and comment alike (the time does not count). */
export function sameDecision(a: Decision, b: Decision): boolean {
  const norm = (d: Decision) => JSON.stringify({ decision: d.decision, arguments: d.arguments ?? null, output: d.output ?? null, comment: d.comment ?? null });
  return norm(a) === norm(b);
}
