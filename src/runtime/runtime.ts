/**
 * The library entry point: `createRuntime({ skills, checkpointer, store })`. Every surface (API,
 * agent tool, CLI, worker) goes through this object; the graph does the work. This file owns the
 * drives of this process (src/runtime/driver.ts: start, follow, recover); each request on a run
 * has its own file beside it: plans.ts (admit, validate, new runs), decide.ts, cancel-run.ts,
 * redrive-run.ts, inspect.ts (the view, the version gate), continue-run.ts, over one RuntimeCore.
 */
import { MemorySaver, type BaseCheckpointSaver } from "@langchain/langgraph";
import { defaultEnv, type RuntimeEnv } from "../../graphs/env.js";
import type { RunState } from "../kernel/run-state.js";
import type { ConfirmInput } from "../kernel/decision.js";
import { compileToolchainGraph } from "../../graphs/toolchain.js";
import { coreSkills } from "../../skills/core/index.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { type RunEvent } from "../kernel/events.js";
import { EXPIRY_ACTING, LIBRARY_ACTING, type Acting, type Decider } from "../kernel/actor.js";
import { workspaceDefault, type ApprovalPolicy } from "../kernel/approval-policy.js";
import type { PendingConfirmation } from "../kernel/pending.js";
import { sweepExpired, type ExpiryResult } from "./expiry.js";
import { policyFor } from "./approvals.js";
import { planBudgetFromEnv, type PlanBudget } from "../plan/admission.js";
import { Planner, plannerConfigFromEnv, type PlanningOutcome } from "../planner/index.js";
import { SkillRegistry } from "../skills/registry.js";
import { MemoryRunStore } from "../store/memory-run-store.js";
import { DEFAULT_DRIVE_RETRY, type DriveRetryPolicy, type RunRow, type RunStore } from "../store/run-store.js";
import { ControlPoll } from "./control-poll.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { WriteBarrier } from "./write-barrier.js";
import { Recording } from "./recording.js";
import { driveSaver, ridesOn } from "./drive-saver.js";
import { followStored } from "./follow.js";
import { continueRun, hasRequestToApply, inputFor } from "./continue-run.js";
import type { RuntimeOptions, RunOptions, RunHandle } from "./options.js";
import { defaultOwner, memoryLimitsFor, runLimits } from "./run-limits.js";
import { startWorkerLoop, type WorkerOptions } from "./worker.js";
import {
  DriveFailedError,
  isLeaseBusy,
  isLeaseLost,
  outsideCallerContext,
  startDrive,
  type Drive,
  type DriveInput,
  type Graph,
} from "./driver.js";
import { buildRunView, type RunView } from "../kernel/run-view.js";
import { withVersionChanges } from "./version-changes.js";
import type { RuntimeCore } from "./core.js";
import { cancelRun } from "./cancel-run.js";
import { TERMINAL_RUN } from "../kernel/status.js";
import {
  planRequest,
  leasedAtCreation,
  preparePlanRun,
  prepareRequestRun,
  validatePlan,
  validatePlanAsync,
  type AdmittedPlan,
  type PlanDeps,
} from "./plans.js";
import { decide } from "./decide.js";
import { redriveRun, type RedriveOptions } from "./redrive-run.js";
import { migrateRuns, type MigrateRunsOptions, type MigrateRunsReport } from "./migrate-runs.js";
import { inspectRun, versionGate } from "./inspect.js";
export type { AdmittedPlan } from "./plans.js";
export type { RuntimeOptions, RunOptions, RunHandle } from "./options.js";
export type { RedriveOptions } from "./redrive-run.js";

export class Runtime {
  readonly registry: SkillRegistry;
  readonly env: RuntimeEnv;
  readonly store: RunStore;
  readonly owner: string;
  private readonly graph: Graph;
  private readonly checkpointer: BaseCheckpointSaver;
  /** Event batches wait for the checkpoint writes they report (write-barrier.ts). */
  readonly writes = new WriteBarrier();
  private readonly active = new Map<string, Drive>();
  private readonly recording = new Recording();
  /** A number per drive started here (the view cache tells two drives of one run apart). */
  private readonly driveSerial = new WeakMap<Drive, number>();
  private drives = 0;
  private readonly allowSkill?: (name: string) => boolean;
  private readonly leaseTtlMs: number;
  /** One statement per beat for every run this process executes: control reads, lease renewals. */
  private readonly controlPoll: ControlPoll;
  private readonly leases: LeaseKeeper;
  private readonly driveRetry: DriveRetryPolicy;
  private readonly versionGraceMs: number;
  readonly planBudget: PlanBudget;
  /** What decide.ts, redrive-run.ts and inspect.ts use of this runtime. */
  private readonly core: RuntimeCore;
  private readonly plans: PlanDeps;

  constructor(opts: RuntimeOptions = {}) {
    this.registry =
      opts.skills instanceof SkillRegistry ? opts.skills : new SkillRegistry([...coreSkills, ...(opts.skills ?? [])]);
    const now = opts.env?.now ?? Date.now;
    this.store = opts.store ?? new MemoryRunStore(now);
    // options given in code override the environment's (TOOLCHAIN_PLANNER_MODEL, OPENAI_BASE_URL, ...)
    const planner =
      opts.planner instanceof Planner
        ? opts.planner
        : opts.planner
          ? new Planner({ registry: this.registry, config: { ...plannerConfigFromEnv(), ...opts.planner }, now })
          : undefined;
    this.env = defaultEnv(this.registry, {
      intents: this.store,
      ...(planner ? { planner } : {}),
      limits: runLimits(opts.limits ?? memoryLimitsFor(this.store), this.store),
      ...(opts.approvalDefaults ? { approvalDefaults: opts.approvalDefaults } : {}),
      ...opts.env,
    });
    this.checkpointer = opts.checkpointer ?? new MemorySaver();
    this.graph = compileToolchainGraph(this.env, driveSaver(this.checkpointer, this.writes, this.store));
    this.allowSkill = opts.allowSkill;
    this.owner = opts.owner ?? defaultOwner();
    this.leaseTtlMs = opts.leaseTtlMs ?? 15_000;
    this.controlPoll = new ControlPoll((ids) => this.store.controlRequests(ids), opts.decisionPollMs ?? 200);
    this.leases = new LeaseKeeper((ids) => this.store.renewLeases(ids, this.owner, this.leaseTtlMs), this.leaseTtlMs);
    this.driveRetry = { ...DEFAULT_DRIVE_RETRY, ...opts.driveRetry };
    this.versionGraceMs = opts.versionGraceMs ?? Number(process.env.TOOLCHAIN_VERSION_GRACE_MS ?? 3_600_000);
    this.planBudget = { ...planBudgetFromEnv(), ...opts.planBudget };
    this.env.planBudget = this.planBudget;
    this.env.planner.budget = this.planBudget;
    this.plans = {
      registry: this.registry,
      env: this.env,
      store: this.store,
      allowSkill: this.allowSkill,
      planBudget: this.planBudget,
    };
    this.core = {
      store: this.store,
      registry: this.registry,
      env: this.env,
      owner: this.owner,
      graph: this.graph,
      leaseTtlMs: this.leaseTtlMs,
      versionGraceMs: this.versionGraceMs,
      active: this.active,
      stateOf: (id) => this.stateOf(id),
      follow: (id) => this.follow(id),
      handleOf: (d) => this.handleOf(d),
      continueRun: (id) => this.continueRun(id),
      drive: (id, input) => this.drive(id, input),
      policyOf: (row, pending) => this.policyOf(row, pending),
    };
  }

  /** Admit (for its author) and validate only: throws PlanValidationError with a stable code. */
  validate(plan: unknown, opts: Pick<RunOptions, "context" | "memory" | "allowSkill" | "author"> = {}): AdmittedPlan {
    return validatePlan(this.plans, plan, opts);
  }

  /**
   * `validate` in slices of at most ~10 ms, giving the event loop back in between (servers: a
   * 10,000-step plan must not stall other requests). Pass the result as `RunOptions.compiled`.
   */
  validateAsync(
    plan: unknown,
    opts: Pick<RunOptions, "context" | "memory" | "allowSkill" | "author"> = {},
  ): Promise<AdmittedPlan> {
    return validatePlanAsync(this.plans, plan, opts);
  }

  /**
   * Plan a request without running anything: the same planner the graph's planner node uses.
   * Throws PLANNING_FAILED when no plan can be written (the fallback names what it understood).
   */
  plan(
    request: string,
    opts: Pick<RunOptions, "context" | "memory" | "allowSkill" | "workspaceId"> & { signal?: AbortSignal } = {},
  ): Promise<PlanningOutcome> {
    return planRequest(this.plans, request, opts);
  }

  /** `drive`: the run is recorded leased to this process, which drives it at once. */
  private prepare(plan: unknown, opts: RunOptions, drive = false) {
    return preparePlanRun(this.plans, plan, opts, drive ? { owner: this.owner, ttlMs: this.leaseTtlMs } : undefined);
  }

  private prepareRequest(request: string, opts: RunOptions, drive = false) {
    const lease = drive ? { owner: this.owner, ttlMs: this.leaseTtlMs } : undefined;
    return prepareRequestRun(this.plans, request, opts, lease);
  }

  /** Validates synchronously (throws before anything is created), records the run, executes it here. */
  run(plan: unknown, opts: RunOptions = {}): RunHandle {
    const { runId, input, created } = this.prepare(plan, opts, true);
    return this.drive(runId, input, created);
  }

  /** Validates and records the run as `queued` for a worker process to execute (API-only processes). */
  async submit(plan: unknown, opts: RunOptions = {}): Promise<{ runId: string }> {
    const { runId, created } = this.prepare(plan, opts);
    await created;
    return { runId };
  }

  /**
   * Start a run from a request: the graph's planner node writes the plan (events
   * planning_started / planning_completed or planning_failed), then it runs like any other.
   */
  runRequest(request: string, opts: RunOptions = {}): RunHandle {
    const { runId, input, created } = this.prepareRequest(request, opts, true);
    return this.drive(runId, input, created);
  }

  /** Record a run from a request as `queued`: a worker plans and executes it. */
  async submitRequest(request: string, opts: RunOptions = {}): Promise<{ runId: string }> {
    const { runId, created } = this.prepareRequest(request, opts);
    await created;
    return { runId };
  }

  /**
   * Answer a confirmation. Refused with CONFIRMATION_NOT_PENDING when the step is not waiting,
   * except an exact repeat of the decision already taken, which answers with the current state
   * and resumes nothing (also when the repeats race each other).
   */
  async confirm(runId: string, input: ConfirmInput, acting: Decider = LIBRARY_ACTING): Promise<RunHandle> {
    return this.recording.after(runId, () => this.decide(runId, input, acting, "principal"));
  }

  /** The one decision path (src/runtime/decide.ts): a principal's decision, or the expiry's reject. */
  private decide(runId: string, input: ConfirmInput, acting: Decider, source: "principal" | "expiry") {
    return decide(this.core, runId, input, acting, source);
  }

  /**
   * Redrive a failed run from where it failed, never repeating a completed step
   * (src/runtime/redrive-run.ts). Refused (409) for a run that is not failed, that another process
   * executes, or whose steps were compensated.
   */
  redrive(runId: string, opts: RedriveOptions = {}, acting: Acting = LIBRARY_ACTING): Promise<RunHandle> {
    return this.recording.after(runId, () => redriveRun(this.core, runId, opts, acting));
  }

  /** The waiting runs pinned at another version of a skill, their arguments carried to this one (src/runtime/migrate-runs.ts). */
  migrateRuns(opts: MigrateRunsOptions, acting: Acting = LIBRARY_ACTING): Promise<MigrateRunsReport> {
    return migrateRuns(this.core, opts, acting);
  }

  /** The approval policy of a wait of this run: workspace default, skill, step (src/kernel/approval-policy.ts). */
  policyOf(
    row: Pick<RunRow, "plan" | "workspaceId">,
    pending: Pick<PendingConfirmation, "stepId" | "skillName" | "kind">,
  ): ApprovalPolicy | undefined {
    const floor = workspaceDefault(this.env.approvalDefaults, row.workspaceId);
    return policyFor((n) => this.registry.get(n), row.plan, pending, floor);
  }

  /**
   * Apply approval deadlines that passed (the worker loop calls this every round): reject as the
   * expiry principal, or leave the wait and report it (src/runtime/expiry.ts).
   */
  expireApprovals(limit = 50): Promise<ExpiryResult[]> {
    return sweepExpired(
      {
        store: this.store,
        now: () => this.env.now(),
        reject: (w, comment) =>
          this.decide(
            w.runId,
            { stepId: w.stepId, decision: "reject", round: w.round, comment },
            EXPIRY_ACTING,
            "expiry",
          ),
      },
      limit,
    );
  }

  /** Continue a run from wherever it stands, or follow its executor (src/runtime/continue-run.ts). */
  private continueRun(runId: string): Promise<RunHandle> {
    return continueRun(this.core, runId);
  }

  /**
   * Cancel: a durable request, like a decision, applied by whichever process executes the run
   * (src/runtime/cancel-run.ts); the first reason wins. Running steps are aborted, completed steps
   * are compensated.
   */
  cancel(runId: string, reason = "cancelled by request", acting: Acting = LIBRARY_ACTING): Promise<RunHandle> {
    return this.recording.after(runId, () => cancelRun(this.core, runId, reason, acting));
  }

  /** The run view; live step statuses while it executes in this process; the stored view once checkpoints are pruned. */
  async getRun(runId: string): Promise<RunView> {
    return (await this.inspect(runId)).view;
  }

  /**
   * The run view and whether the run has started: `started` is false while nothing but its
   * record (or the graph input) is stored (src/runtime/inspect.ts).
   */
  inspect(runId: string): Promise<{ view: RunView; started: boolean }> {
    return this.recording.after(runId, () => inspectRun(this.core, runId));
  }

  events(runId: string, after = 0): Promise<RunEvent[]> {
    return this.recording.after(runId, () => this.store.list(runId, after));
  }

  /**
   * Take over runs that need an executor: queued ones (submitted by an API-only process) and
   * active ones whose owner stopped heartbeating (crashed). Each continues from its checkpoint.
   */
  async recover(limit = 10): Promise<string[]> {
    const claimed = await this.store.claimRunnable(this.owner, this.leaseTtlMs, limit);
    const started: string[] = [];
    for (const runId of claimed) {
      // A drive of this process may hold it (a failed drive's own re-drive after its backoff,
      // afterFailure, can start while this poll reads the row): the lease is that drive's, under
      // the same owner name, so it is neither driven twice nor released here (releasing it made
      // that drive lose its lease mid-way, and its attempt went uncounted).
      const ours = () => this.active.has(runId);
      if (ours()) continue;
      try {
        const row = await this.store.getRow(runId);
        if (!row) continue;
        const input = await inputFor(this.core, runId, row);
        if (ours()) continue;
        // the lease was taken by claimRunnable; the drive renews and releases it
        this.drive(runId, input).result.catch(() => undefined);
        started.push(runId);
      } catch {
        if (!ours()) await this.store.releaseLease(runId, this.owner).catch(() => undefined);
      }
    }
    return started;
  }

  /**
   * Retention: delete the LangGraph checkpoints of runs that finished more than `olderThanMs`
   * ago. The run history (runs, step runs, events) stays: getRun then answers from it.
   */
  async pruneCheckpoints(opts: { olderThanMs: number; limit?: number }): Promise<string[]> {
    const ids = await this.store.prunable(new Date(this.env.now() - opts.olderThanMs), opts.limit ?? 500);
    const done: string[] = [];
    for (const id of ids) {
      if (this.active.has(id)) continue;
      await this.checkpointer.deleteThread(id);
      done.push(id);
    }
    await this.store.markPruned(done);
    return done;
  }

  /** Poll for runs to execute until stopped (worker processes; also the default single process). */
  startWorker(opts: WorkerOptions = {}): () => Promise<void> {
    return startWorkerLoop(
      {
        room: (max) => max - this.active.size,
        recover: (n) => this.recover(n),
        expire: () => this.expireApprovals(),
        prune: (olderThanMs) => this.pruneCheckpoints({ olderThanMs }),
        now: () => this.env.now(),
      },
      opts,
    );
  }

  /**
   * A handle on a run wherever it stands: the local drive when it executes here, else one that
   * waits (through the store) until the run is terminal or waits for a decision, resuming it here
   * if a recorded decision or cancel has nobody applying it. For callers that must continue a run
   * they did not start in this call (the agent tool after a LangGraph resume).
   */
  attach(runId: string): RunHandle {
    return this.follow(runId);
  }

  /**
   * The version of what getRun and the API view are built from: the store's (embedded: kept in
   * process; server: the row, step rows and latest checkpoint) plus, for a run executing here, its
   * drive's live projection. Null: the store cannot tell (no caching).
   */
  async viewVersion(runId: string): Promise<string | null> {
    await this.recording.after(runId, async () => undefined);
    const local = this.active.get(runId);
    const mine = local ? `${this.driveSerial.get(local)}.${local.live.applied}` : "-";
    if (this.store.viewGeneration) return `${this.store.viewGeneration(runId)}|${mine}`;
    const stored = this.store.viewVersion ? await this.store.viewVersion(runId) : undefined;
    return stored === undefined ? null : `${stored}|${mine}`;
  }

  /** Runs executing in this process now. */
  activeRuns(): string[] {
    return [...this.active.keys()];
  }

  /** Wait for every drive in this process to settle (shutdown). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.active.values()].map((d) => d.result));
  }

  private handleOf(d: Drive): RunHandle {
    return { runId: d.runId, events: d.events, result: d.result };
  }

  /**
   * A handle on a run executed elsewhere (or already settled): waits via the store. A suspended
   * run with a recorded decision or cancel that nobody is applying (no lease) is resumed here, so
   * a caller never waits for a drive that will not come (library use without workers).
   */
  private follow(runId: string, released = new AbortController()): RunHandle {
    const local = this.active.get(runId);
    if (local) return this.handleOf(local);
    return followStored(runId, released, {
      store: this.store,
      now: () => this.env.now(),
      executingHere: () => this.active.has(runId),
      hasRequestToApply: (row) => hasRequestToApply(this.store, runId, row),
      view: () => this.getRun(runId),
      resume: async () => (await this.continueRun(runId)).result,
    });
  }

  /** The run's graph state, read outside any graph the caller may be running in (see outsideCallerContext). */
  private stateOf(runId: string) {
    return outsideCallerContext(() => this.graph.getState({ configurable: { thread_id: runId } }));
  }

  private drive(runId: string, input: DriveInput, created?: Promise<RunRow | undefined>): RunHandle {
    if (this.active.has(runId))
      throw new ToolchainError(ErrorCode.RUN_NOT_ACTIVE, `run ${runId} is already being executed by this process`);
    const deps = {
      graph: this.graph,
      store: this.store,
      controls: this.env.controls,
      owner: this.owner,
      leaseTtlMs: this.leaseTtlMs,
      controlPoll: this.controlPoll,
      leases: this.leases,
      driveRetry: this.driveRetry,
      writesSettled: (id: string) => this.writes.settled(id),
      ...ridesOn(this.checkpointer),
      // the settled view a caller is answered with says, as every other view does, what a deploy changed
      view: async (id: string) => {
        const values = (await this.stateOf(id)).values as RunState;
        return withVersionChanges(this.core, values, buildRunView(values));
      },
      // asked per root checkpoint by the final ride: a run not yet ended costs no view
      viewOf: async (values: unknown) =>
        TERMINAL_RUN.has((values as RunState).status)
          ? withVersionChanges(this.core, values as RunState, buildRunView(values as RunState))
          : undefined,
      versionGate: (id: string) => versionGate(this.core, id),
    };
    let drive!: Drive;
    const after = () => {
      if (this.active.get(runId) === drive) this.active.delete(runId);
    };
    // a new run's first drive: its row is inserted before the drive streams, its thread is empty
    const first = created && { ...deps, store: leasedAtCreation(this.store, created), freshThread: true };
    if (created) this.recording.track(runId, created);
    drive = startDrive(first || deps, runId, input, after);
    this.active.set(runId, drive);
    this.driveSerial.set(drive, ++this.drives);
    // a caller that gives up (a request that timed out) releases a follow of another owner's drive
    const released = new AbortController();
    drive.result = drive.result.then(
      (view) => this.afterDrive(runId, view),
      (e) => this.afterFailure(runId, e, released),
    );
    drive.result.catch(() => undefined);
    return { ...this.handleOf(drive), release: () => released.abort() };
  }

  /**
   * A drive settled. A decision or cancel recorded while it was finishing (after its scheduler stopped listening)
   * would otherwise wait for nobody: resume at once, and answer every holder of this handle with that resume's outcome.
   */
  private async afterDrive(runId: string, view: RunView): Promise<RunView> {
    // left for a process with the pinned skill versions: resuming here would only leave again
    if (!view.pendingConfirmations.length || this.active.has(runId) || view.waitingFor) return view;
    const row = await this.store.getRow(runId).catch(() => undefined);
    if (!row || row.leaseOwner || !(await hasRequestToApply(this.store, runId, row).catch(() => false))) return view;
    return (await this.continueRun(runId)).result;
  }

  /** A drive threw: follow another owner, answer the failed run, or re-drive after the backoff. */
  private async afterFailure(runId: string, e: unknown, released?: AbortController): Promise<RunView> {
    if (isLeaseBusy(e)) return this.follow(runId, released).result;
    if (e instanceof DriveFailedError) {
      if (!e.outcome) return this.follow(runId).result; // not ours any more, or the database is away: its lease expires
      if (e.outcome.final) return this.getRun(runId);
      await new Promise((r) => setTimeout(r, e.outcome!.retryInMs));
      return (await this.continueRun(runId)).result;
    }
    if (isLeaseLost(e)) return this.follow(runId).result;
    throw e;
  }
}

export function createRuntime(opts: RuntimeOptions = {}): Runtime {
  return new Runtime(opts);
}
