/** RunStore in process memory: the library default and the reference for the shared store suite. */
import type { Acting } from "../kernel/actor.js";
import type { Decision } from "../kernel/decision.js";
import type { EmittedEvent, RunEvent } from "../kernel/events.js";
import { TERMINAL_RUN } from "../kernel/status.js";
import type { RunView } from "../kernel/run-view.js";
import { keepDeadlines, project } from "./projection.js";
import {
  LeaseLostError,
  plannedBy,
  sameDecision,
  voterOf,
  type NewRun,
  type ExpiredWait,
  type ExpiryOutcome,
  type RecordDecisionResult,
  type RunRow,
  type RunStore,
} from "./run-store.js";
import {
  driveBackoffMs,
  driveFailedError,
  type ControlRequests,
  type DriveFailureOutcome,
  type DriveRetryPolicy,
} from "./run-store.js";
import type { StepError } from "../kernel/errors.js";
import {
  decodeRunCursor,
  encodeRunCursor,
  type ListRunsQuery,
  type RunChangeListener,
  type RunPage,
  type RunSummary,
  type SyncOptions,
  type NewRunLease,
} from "./run-store.js";
import type { RunStatus } from "../kernel/status.js";

interface Entry {
  row: RunRow;
  events: RunEvent[];
  keys: Set<string>;
  /**
   * The last synced view as JSON: the snapshot cannot share objects with the caller's, and it reads
   * back as the Postgres store's does (a JSON round trip). Serializing costs about a third of a
   * structuredClone of the same view (a sync per drive end; a read parses).
   */
  view?: { json: string; updatedAt: string };
  createdAt: Date;
  finishedAt?: Date;
  nextAttemptAt?: number;
  decisions: Map<string, { stepId: string; round: number; decision: Decision; applied: boolean }>;
  /** Quorum votes, in the order they came. */
  approvals?: { stepId: string; round: number; voter: string; decision: Decision }[];
}

export class MemoryRunStore implements RunStore {
  private readonly runs = new Map<string, Entry>();
  constructor(private readonly now: () => number = Date.now) {}

  private get(runId: string): Entry {
    const e = this.runs.get(runId);
    if (!e) throw new Error(`run ${runId} has no history row`);
    return e;
  }

  async createRun(r: NewRun, lease?: NewRunLease): Promise<RunRow | undefined> {
    if (this.runs.has(r.runId)) throw new Error(`run ${r.runId} already exists`);
    const createdAt = new Date(this.now());
    this.runs.set(r.runId, {
      row: {
        ...r,
        admission: r.admission ?? null,
        status: "queued",
        pendingConfirmations: [],
        leaseOwner: null,
        leaseExpiresAt: null,
        lastSeq: 0,
        checkpointPruned: false,
        error: null,
        cancelRequest: null,
        driveFailures: 0,
        createdAt: createdAt.toISOString(),
      },
      events: [],
      keys: new Set(),
      createdAt,
      decisions: new Map(),
    });
    return lease ? this.takeLease(r.runId, lease.owner, lease.ttlMs) : undefined;
  }
  async getRow(runId: string): Promise<RunRow | undefined> {
    const e = this.runs.get(runId);
    return e ? { ...e.row } : undefined;
  }
  async append(runId: string, events: readonly EmittedEvent[], owner?: string): Promise<RunEvent[]> {
    const fresh = this.appendNow(runId, events, owner);
    if (fresh.length) this.changed(runId, fresh);
    return fresh;
  }
  private appendNow(runId: string, events: readonly EmittedEvent[], owner?: string): RunEvent[] {
    const e = this.get(runId);
    if (owner && e.row.leaseOwner !== owner) throw new LeaseLostError(runId, owner);
    const fresh: RunEvent[] = [];
    for (const ev of events) {
      if (e.keys.has(ev.key)) continue;
      e.keys.add(ev.key);
      fresh.push({ ...ev, runId, seq: ++e.row.lastSeq });
    }
    e.events.push(...fresh);
    const planned = plannedBy(fresh);
    if (planned && !e.row.plan.steps.length) e.row.plan = planned.plan;
    const p = project(fresh, e.row.pendingConfirmations);
    e.row.pendingConfirmations = p.pending;
    if (p.runStatus) e.row.status = p.runStatus;
    return fresh;
  }
  async list(runId: string, after = 0): Promise<RunEvent[]> {
    return (this.runs.get(runId)?.events ?? []).filter((x) => x.seq > after);
  }
  async sync(v: RunView, owner?: string, opts?: SyncOptions): Promise<void> {
    this.syncNow(v, owner);
    if (opts?.releaseLease && owner) await this.releaseLease(v.runId, owner);
    this.changed(v.runId, []);
  }
  private syncNow(v: RunView, owner?: string): void {
    const e = this.get(v.runId);
    if (owner && e.row.leaseOwner !== null && e.row.leaseOwner !== owner) throw new LeaseLostError(v.runId, owner);
    e.view = { json: JSON.stringify(v), updatedAt: v.updatedAt };
    if (!e.row.plan.steps.length && v.plan.steps.length) e.row.plan = v.plan;
    e.row.status = v.status;
    e.row.memory = v.memory;
    e.row.pendingConfirmations = keepDeadlines(v.pendingConfirmations, e.row.pendingConfirmations);
    e.row.error = v.error;
    e.row.driveFailures = 0;
    e.nextAttemptAt = undefined;
    if (TERMINAL_RUN.has(v.status)) e.finishedAt ??= new Date(this.now());
  }
  async getView(runId: string): Promise<RunView | undefined> {
    const v = this.runs.get(runId)?.view;
    return v ? (JSON.parse(v.json) as RunView) : undefined;
  }
  private leaseFree(e: Entry, owner: string): boolean {
    return (
      e.row.leaseOwner === null ||
      e.row.leaseOwner === owner ||
      (e.row.leaseExpiresAt !== null && e.row.leaseExpiresAt.getTime() < this.now())
    );
  }
  async acquireLease(runId: string, owner: string, ttlMs: number): Promise<boolean> {
    return (await this.takeLease(runId, owner, ttlMs)) !== undefined;
  }
  async takeLease(runId: string, owner: string, ttlMs: number): Promise<RunRow | undefined> {
    const e = this.get(runId);
    if (!this.leaseFree(e, owner)) return undefined;
    e.row.leaseOwner = owner;
    e.row.leaseExpiresAt = new Date(this.now() + ttlMs);
    return { ...e.row };
  }
  async renewLeases(runIds: readonly string[], owner: string, ttlMs: number): Promise<Set<string>> {
    const held = new Set<string>();
    for (const runId of runIds) {
      const e = this.runs.get(runId);
      if (!e || e.row.leaseOwner !== owner) continue;
      e.row.leaseExpiresAt = new Date(this.now() + ttlMs);
      held.add(runId);
    }
    return held;
  }
  async releaseLease(runId: string, owner: string): Promise<void> {
    const e = this.runs.get(runId);
    if (e && e.row.leaseOwner === owner) {
      e.row.leaseOwner = null;
      e.row.leaseExpiresAt = null;
    }
  }
  async claimRunnable(owner: string, ttlMs: number, limit: number): Promise<string[]> {
    const now = this.now();
    const eligible = (e: Entry) => {
      if (e.row.leaseOwner !== null && (e.row.leaseExpiresAt?.getTime() ?? 0) >= now) return false;
      if (e.nextAttemptAt !== undefined && e.nextAttemptAt > now) return false;
      if (["queued", "planning", "running"].includes(e.row.status)) return true;
      // a lease left behind by a dead process: its drive ended mid-way, whatever the row says
      if (e.row.leaseOwner !== null) return true;
      const suspended =
        (e.row.status === "waiting_confirmation" || e.row.status === "rollback_failed") &&
        e.row.pendingConfirmations.length > 0;
      return suspended && (e.row.cancelRequest !== null || [...e.decisions.values()].some((d) => !d.applied));
    };
    // fair across workspaces: rank within the workspace (oldest first) after the runs it already
    // has executing (live leases), then take rank by rank: a worker claiming one run per freed slot
    // must not hand every slot to the workspace with the oldest backlog
    const rank = new Map<string, number>();
    for (const e of this.runs.values())
      if (e.row.leaseOwner !== null && (e.row.leaseExpiresAt?.getTime() ?? 0) >= now)
        rank.set(e.row.workspaceId, (rank.get(e.row.workspaceId) ?? 0) + 1);
    const ranked = [...this.runs.values()]
      .filter(eligible)
      .sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime())
      .map((e) => {
        const n = (rank.get(e.row.workspaceId) ?? 0) + 1;
        rank.set(e.row.workspaceId, n);
        return { e, n };
      })
      .sort((a, b) => a.n - b.n || a.e.createdAt.getTime() - b.e.createdAt.getTime());
    const out: string[] = [];
    for (const { e } of ranked.slice(0, limit)) {
      e.row.leaseOwner = owner;
      e.row.leaseExpiresAt = new Date(now + ttlMs);
      out.push(e.row.runId);
    }
    return out;
  }
  async requestCancel(runId: string, reason: string, acting?: Acting): Promise<void> {
    const e = this.get(runId);
    if (TERMINAL_RUN.has(e.row.status) && !e.row.pendingConfirmations.length) return;
    e.row.cancelRequest ??= {
      reason,
      at: new Date(this.now()).toISOString(),
      ...(acting ? { by: acting.by, via: acting.via } : {}),
    };
  }
  async controlRequests(runIds: readonly string[]): Promise<Map<string, ControlRequests>> {
    const found = new Map<string, ControlRequests>();
    for (const runId of runIds) {
      const e = this.runs.get(runId);
      if (!e) continue;
      const decisions = await this.unappliedDecisions(runId);
      if (e.row.cancelRequest || decisions.length) found.set(runId, { cancel: e.row.cancelRequest, decisions });
    }
    return found;
  }
  async recordDriveFailure(
    runId: string,
    owner: string,
    error: StepError,
    policy: DriveRetryPolicy,
    permanent: boolean,
  ): Promise<DriveFailureOutcome | undefined> {
    const e = this.runs.get(runId);
    if (!e || (e.row.leaseOwner !== null && e.row.leaseOwner !== owner)) return undefined;
    const failures = ++e.row.driveFailures;
    const final = permanent || failures >= policy.maxFailures;
    const retryInMs = final ? 0 : driveBackoffMs(policy, failures);
    if (final) {
      e.row.status = "failed";
      e.row.error = driveFailedError(error, failures, permanent);
      e.row.pendingConfirmations = [];
      e.finishedAt = new Date(this.now());
      e.nextAttemptAt = undefined;
      if (e.view) {
        const failed = { ...JSON.parse(e.view.json), status: "failed", error: e.row.error, pendingConfirmations: [] };
        e.view = { json: JSON.stringify(failed), updatedAt: e.view.updatedAt };
      }
    } else e.nextAttemptAt = this.now() + retryInMs;
    return { failures, final, retryInMs };
  }
  async recordDecision(runId: string, stepId: string, round: number, d: Decision): Promise<RecordDecisionResult> {
    const e = this.get(runId);
    const k = `${stepId}\u0000${round}`;
    const prev = e.decisions.get(k);
    if (prev) return sameDecision(prev.decision, d) ? "duplicate" : "conflict";
    e.decisions.set(k, { stepId, round, decision: d, applied: false });
    return "recorded";
  }
  async recordApproval(
    runId: string,
    stepId: string,
    round: number,
    d: Decision,
  ): Promise<{ result: RecordDecisionResult; votes: Decision[] }> {
    const e = this.get(runId);
    const list = (e.approvals ??= []);
    const mine = list.filter((a) => a.stepId === stepId && a.round === round);
    const prev = mine.find((a) => a.voter === voterOf(d));
    if (!prev) list.push({ stepId, round, voter: voterOf(d), decision: structuredClone(d) });
    const votes = list.filter((a) => a.stepId === stepId && a.round === round).map((a) => structuredClone(a.decision));
    return { result: !prev ? "recorded" : sameDecision(prev.decision, d) ? "duplicate" : "conflict", votes };
  }
  private readonly expiries = new Map<string, ExpiryOutcome>();
  async expiredWaits(now: Date, limit: number): Promise<ExpiredWait[]> {
    const out: ExpiredWait[] = [];
    for (const [runId, e] of this.runs)
      for (const p of e.row.pendingConfirmations) {
        const round = p.round ?? 0;
        if (!p.expiresAt || Date.parse(p.expiresAt) > now.getTime()) continue;
        if (this.expiries.has(`${runId}\u0000${p.stepId}\u0000${round}`)) continue;
        out.push({ runId, stepId: p.stepId, round, expiresAt: p.expiresAt, onExpiry: p.onExpiry ?? "reject" });
      }
    return out.sort((a, b) => Date.parse(a.expiresAt) - Date.parse(b.expiresAt)).slice(0, limit);
  }
  async markExpiryHandled(runId: string, stepId: string, round: number, outcome: ExpiryOutcome): Promise<boolean> {
    const k = `${runId}\u0000${stepId}\u0000${round}`;
    if (this.expiries.has(k)) return false;
    this.expiries.set(k, outcome);
    return true;
  }
  async listApprovals(runId: string) {
    return (this.runs.get(runId)?.approvals ?? []).map(({ stepId, round, decision }) => ({
      stepId,
      round,
      decision: structuredClone(decision),
    }));
  }
  async getDecision(runId: string, stepId: string, round: number): Promise<Decision | undefined> {
    return this.runs.get(runId)?.decisions.get(`${stepId}\u0000${round}`)?.decision;
  }
  async unappliedDecisions(runId: string) {
    return [...this.get(runId).decisions.values()]
      .filter((d) => !d.applied)
      .map(({ stepId, round, decision }) => ({ stepId, round, decision }));
  }
  async markApplied(runId: string, keys: { stepId: string; round: number }[]): Promise<void> {
    const e = this.get(runId);
    for (const k of keys) {
      const d = e.decisions.get(`${k.stepId}\u0000${k.round}`);
      if (d) d.applied = true;
    }
  }
  private readonly intents = new Set<string>();
  async claimIntent(runId: string, stepId: string, attempt: number): Promise<boolean> {
    const k = `${runId}\u0000${stepId}\u0000${attempt}`;
    if (this.intents.has(k)) return false;
    this.intents.add(k);
    return true;
  }
  async hasIntent(runId: string, stepId: string, attempt: number): Promise<boolean> {
    return this.intents.has(`${runId}\u0000${stepId}\u0000${attempt}`);
  }
  async prunable(before: Date, limit: number): Promise<string[]> {
    return [...this.runs.values()]
      .filter((e) => e.finishedAt && e.finishedAt < before && !e.row.checkpointPruned && TERMINAL_RUN.has(e.row.status))
      .filter(
        (e) =>
          !e.row.pendingConfirmations.length &&
          e.row.leaseOwner === null &&
          ![...e.decisions.values()].some((d) => !d.applied),
      )
      .slice(0, limit)
      .map((e) => e.row.runId);
  }
  async markPruned(runIds: string[]): Promise<void> {
    for (const id of runIds) {
      const e = this.runs.get(id);
      if (e) e.row.checkpointPruned = true;
    }
  }

  async listRuns(q: ListRunsQuery): Promise<RunPage> {
    const after = q.cursor ? decodeRunCursor(q.cursor) : undefined;
    const key = (e: Entry) => BigInt(e.createdAt.getTime()) * 1000n;
    const newestFirst = (a: Entry, b: Entry) =>
      key(a) === key(b) ? (a.row.runId < b.row.runId ? 1 : -1) : key(a) < key(b) ? 1 : -1;
    const statuses = q.statuses?.length ? new Set<RunStatus>(q.statuses) : undefined;
    const all = [...this.runs.values()]
      .filter((e) => e.row.workspaceId === q.workspaceId && (!statuses || statuses.has(e.row.status)))
      .filter((e) => !after || key(e) < BigInt(after.t) || (key(e) === BigInt(after.t) && e.row.runId < after.runId))
      .sort(newestFirst);
    const page = all.slice(0, q.limit);
    const last = page.at(-1);
    const summary = (e: Entry): RunSummary => ({
      runId: e.row.runId,
      status: e.row.status,
      traceId: e.row.traceId,
      planId: e.row.plan.planId ?? null,
      goal: e.row.plan.goal ?? null,
      stepCount: e.row.plan.steps.length,
      createdAt: e.createdAt.toISOString(),
      updatedAt: e.view?.updatedAt ?? e.createdAt.toISOString(),
      finishedAt: e.finishedAt?.toISOString() ?? null,
    });
    return {
      runs: page.map(summary),
      nextCursor: all.length > q.limit && last ? encodeRunCursor(key(last), last.row.runId) : null,
    };
  }
  async countRuns(): Promise<Partial<Record<RunStatus, number>>> {
    const out: Partial<Record<RunStatus, number>> = {};
    for (const e of this.runs.values()) out[e.row.status] = (out[e.row.status] ?? 0) + 1;
    return out;
  }
  private readonly watchers = new Set<RunChangeListener>();
  onChange(listener: RunChangeListener): () => void {
    this.watchers.add(listener);
    return () => void this.watchers.delete(listener);
  }
  private changed(runId: string, events: readonly RunEvent[]): void {
    for (const l of this.watchers) {
      try {
        l({ runId, events });
      } catch {
        // a watcher's failure is its own business
      }
    }
  }
}
