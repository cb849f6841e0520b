/**
 * The library entry point: `createRuntime({ skills, checkpointer, store })`. Every surface (API,
 * agent tool, CLI, worker) goes through this object; the graph does the work, this file validates
 * at the boundary, records runs and decisions, and starts drives (src/runtime/driver.ts).
 */
import { MemorySaver, type BaseCheckpointSaver } from "@langchain/langgraph";
import { defaultEnv, rememberCompiled, type RuntimeEnv } from "../../graphs/env.js";
import type { RunState } from "../../graphs/state.js";
import type { ConfirmInput, Decision } from "../kernel/decision.js";
import { compileToolchainGraph } from "../../graphs/toolchain.js";
import { coreSkills } from "../../skills/core/index.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { fault, FaultPoint } from "../kernel/faults.js";
import { EventType, type RunEvent } from "../kernel/events.js";
import { LIBRARY_ACTING, type Acting, type Decider } from "../kernel/actor.js";
import { castVote, policyFor } from "./approvals.js";
import { TERMINAL_RUN } from "../kernel/status.js";
import { compilePlan, compilePlanAsync, type CompiledPlan } from "../plan/validate.js";
import { admitPlan, stepAsks, LIBRARY_AUTHOR, planBudgetFromEnv, type Admission, type PlanAuthor, type PlanBudget } from "../plan/admission.js";

/** A validated plan and its admission (who wrote it, what was clamped). */
export type AdmittedPlan = CompiledPlan & { admission: Admission };
import { Planner, plannerConfigFromEnv, type PlanningOutcome } from "../planner/index.js";
import { SkillRegistry } from "../skills/registry.js";
import { MemoryRunStore } from "../store/memory-run-store.js";
import { DEFAULT_DRIVE_RETRY, sameDecision, type DriveRetryPolicy, type RunStore } from "../store/run-store.js";
import { assertStorable } from "../kernel/storable.js";
import { WriteBarrier } from "./write-barrier.js";
import { followStored } from "./follow.js";
import { allowedSkillNames, continueInput, newPlanRun, newRequestRun } from "./new-run.js";
import { checkDecision, latestDecisions, parseDecision } from "./admit-decision.js";
import type { RuntimeOptions, RunOptions, RunHandle } from "./options.js";
import { defaultOwner, memoryLimitsFor, runLimits } from "./run-limits.js";
import { startWorkerLoop, type WorkerOptions } from "./worker.js";
import { DriveFailedError, isLeaseBusy, isLeaseLost, outsideCallerContext, startDrive, type Drive, type DriveInput, type Graph } from "./driver.js";
import { buildRunView, type RunView } from "./view.js";
import type { RunRow } from "../store/run-store.js";

export type { RuntimeOptions, RunOptions, RunHandle } from "./options.js";

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
  /** A number per drive started here (the view cache tells two drives of one run apart). */
  private readonly driveSerial = new WeakMap<Drive, number>();
  private drives = 0;
  private readonly allowSkill?: (name: string) => boolean;
  private readonly leaseTtlMs: number;
  private readonly decisionPollMs: number;
  private readonly driveRetry: DriveRetryPolicy;
  readonly planBudget: PlanBudget;

  constructor(opts: RuntimeOptions = {}) {
    this.registry = opts.skills instanceof SkillRegistry ? opts.skills : new SkillRegistry([...coreSkills, ...(opts.skills ?? [])]);
    const now = opts.env?.now ?? Date.now;
    this.store = opts.store ?? new MemoryRunStore(now);
    // options given in code override the environment's (TOOLCHAIN_PLANNER_MODEL, OPENAI_BASE_URL, ...)
    const planner = opts.planner instanceof Planner ? opts.planner : opts.planner ? new Planner({ registry: this.registry, config: { ...plannerConfigFromEnv(), ...opts.planner }, now }) : undefined;
    this.env = defaultEnv(this.registry, { intents: this.store, ...(planner ? { planner } : {}), limits: runLimits(opts.limits ?? memoryLimitsFor(this.store), this.store), ...opts.env });
    this.checkpointer = opts.checkpointer ?? new MemorySaver();
    const saver = this.writes.wrap(this.checkpointer, this.store.viewGeneration ? (runId) => this.store.viewChanged?.(runId) : undefined);
    this.graph = compileToolchainGraph(this.env, saver);
    this.allowSkill = opts.allowSkill;
    this.owner = opts.owner ?? defaultOwner();
    this.leaseTtlMs = opts.leaseTtlMs ?? 15_000;
    this.decisionPollMs = opts.decisionPollMs ?? 200;
    this.driveRetry = { ...DEFAULT_DRIVE_RETRY, ...opts.driveRetry };
    this.planBudget = { ...planBudgetFromEnv(), ...opts.planBudget };
    this.env.planBudget = this.planBudget;
    this.env.planner.budget = this.planBudget;
  }

  /** Admit (for its author) and validate only: throws PlanValidationError with a stable code. */
  validate(plan: unknown, opts: Pick<RunOptions, "context" | "memory" | "allowSkill" | "author"> = {}): AdmittedPlan {
    const vo = this.validateOptions(opts, plan);
    const a = this.admit(plan, opts.author);
    return { ...compilePlan(a.plan, vo), admission: a.admission };
  }

  /**
   * `validate` in slices of at most ~10 ms, giving the event loop back in between (servers: a
   * 10,000-step plan must not stall other requests). Pass the result as `RunOptions.compiled`.
   */
  async validateAsync(plan: unknown, opts: Pick<RunOptions, "context" | "memory" | "allowSkill" | "author"> = {}): Promise<AdmittedPlan> {
    const vo = this.validateOptions(opts, plan);
    const a = this.admit(plan, opts.author);
    return { ...(await compilePlanAsync(a.plan, vo)), admission: a.admission };
  }

  /** The plan as its author may run it (src/plan/admission.ts). */
  private admit(plan: unknown, author: PlanAuthor = LIBRARY_AUTHOR) {
    return admitPlan(plan, author, (n) => this.registry.get(n), this.env.planner.config, this.planBudget);
  }

  private validateOptions(opts: Pick<RunOptions, "context" | "memory" | "allowSkill">, plan: unknown) {
    // values the run history cannot store are refused before anything else looks at them
    assertStorable(plan, "plan");
    if (opts.context !== undefined) assertStorable(opts.context, "context");
    if (opts.memory !== undefined) assertStorable(opts.memory, "memory");
    const [global, call] = [this.allowSkill, opts.allowSkill];
    const allowSkill = global && call ? (name: string) => global(name) && call(name) : global ?? call;
    return { registry: this.registry, allowSkill, context: opts.context, memory: opts.memory };
  }

  /** Validates synchronously (throws before anything is created), records the run, executes it here. */
  run(plan: unknown, opts: RunOptions = {}): RunHandle {
    const { runId, input, created } = this.prepare(plan, opts);
    return this.drive(runId, input, created);
  }

  /** Validates and records the run as `queued` for a worker process to execute (API-only processes). */
  async submit(plan: unknown, opts: RunOptions = {}): Promise<{ runId: string }> {
    const { runId, created } = this.prepare(plan, opts);
    await created;
    return { runId };
  }

  /**
   * Plan a request without running anything: the same planner the graph's planner node uses.
   * Throws PLANNING_FAILED when no plan can be written (the fallback names what it understood).
   */
  async plan(request: string, opts: Pick<RunOptions, "context" | "memory" | "allowSkill" | "workspaceId"> & { signal?: AbortSignal } = {}): Promise<PlanningOutcome> {
    const allowed = allowedSkillNames(this.registry, this.allowSkill, opts.allowSkill);
    const out = await this.env.planner.plan({
      request,
      context: opts.context ?? {},
      memory: opts.memory ?? {},
      allowSkill: allowed ? (n) => allowed.includes(n) : undefined,
      workspaceId: opts.workspaceId,
      signal: opts.signal,
    });
    return { ...out, asks: out.plan.steps.filter((st) => stepAsks(this.registry, st)).map((st) => st.stepId) };
  }

  /**
   * Start a run from a request: the graph's planner node writes the plan (events
   * planning_started / planning_completed or planning_failed), then it runs like any other.
   */
  runRequest(request: string, opts: RunOptions = {}): RunHandle {
    const { runId, input, created } = this.prepareRequest(request, opts);
    return this.drive(runId, input, created);
  }

  /** Record a run from a request as `queued`: a worker plans and executes it. */
  async submitRequest(request: string, opts: RunOptions = {}): Promise<{ runId: string }> {
    const { runId, created } = this.prepareRequest(request, opts);
    await created;
    return { runId };
  }

  private prepareRequest(request: string, opts: RunOptions) {
    const r = newRequestRun(request, opts, allowedSkillNames(this.registry, this.allowSkill, opts.allowSkill) ?? null, new Date(this.env.now()).toISOString());
    return { runId: r.runId, input: r.input, created: this.store.createRun(r.record) };
  }

  private prepare(plan: unknown, opts: RunOptions) {
    const compiled: AdmittedPlan = opts.compiled && "admission" in opts.compiled ? (opts.compiled as AdmittedPlan) : opts.compiled ? { ...opts.compiled, admission: this.admit(opts.compiled.plan, opts.author).admission } : this.validate(plan, opts);
    const r = newPlanRun(compiled, opts, new Date(this.env.now()).toISOString());
    // the graph's nodes find it compiled (a big plan is not compiled again on the event loop)
    rememberCompiled(this.env, r.runId, compiled);
    return { runId: r.runId, input: r.input, created: this.store.createRun(r.record) };
  }

  /**
   * Answer a confirmation. Refused with CONFIRMATION_NOT_PENDING when the step is not waiting,
   * except an exact repeat of the decision already taken, which answers with the current state
   * and resumes nothing (also when the repeats race each other).
   */
  async confirm(runId: string, input: ConfirmInput, acting: Decider = LIBRARY_ACTING): Promise<RunHandle> {
    const { input: d, decision } = parseDecision(input);
    const row = await this.store.getRow(runId);
    if (!row) throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
    const local = this.active.get(runId);
    await local?.ready;
    const pending = local ? local.live.pending.get(d.stepId) : row.pendingConfirmations.find((p) => p.stepId === d.stepId);
    if (!pending) {
      // (checkpoints pruned by retention: the decision table still knows a round-0 decision)
      const prevRound = d.round ?? (await this.lastRound(runId, d.stepId)) ?? 0;
      const prev = await this.store.getDecision(runId, d.stepId, prevRound);
      if (prev && sameDecision(prev, decision)) return this.follow(runId);
      throw new ToolchainError(ErrorCode.CONFIRMATION_NOT_PENDING, `step "${d.stepId}" of run ${runId} is not waiting for confirmation`);
    }
    checkDecision(runId, d, pending, row.plan, this.registry);
    decision.at = new Date(this.env.now()).toISOString();
    decision.round = pending.round ?? 0;
    decision.by = acting.by;
    decision.via = acting.via;
    // the step's approval policy: who may decide, and how many must approve (src/runtime/approvals.ts)
    const policy = policyFor((n) => this.registry.get(n), row.plan, { ...pending, stepId: d.stepId });
    const vote = await castVote(this.store, runId, d.stepId, decision, policy, acting, row.admission?.requestedBy);
    if ("counted" in vote) return this.follow(runId); // the quorum is not complete: the step keeps waiting
    Object.assign(decision, vote.proceed);
    const recorded = await this.store.recordDecision(runId, d.stepId, decision.round, decision);
    fault(FaultPoint.decision_recorded);
    if (recorded === "duplicate") return this.follow(runId);
    // two last approvals of a quorum racing: the quorum is complete either way
    if (recorded === "conflict" && decision.approvals && (await this.store.getDecision(runId, d.stepId, decision.round))?.decision === "approve") return this.follow(runId);
    if (recorded === "conflict") throw new ToolchainError(ErrorCode.CONFIRMATION_NOT_PENDING, `step "${d.stepId}" of run ${runId} already has a different decision`);
    if (local) {
      // the scheduler is running here, maybe busy on other branches: hand it the decision now
      local.live.pending.delete(d.stepId);
      local.live.decided.set(d.stepId, decision);
      this.env.controls.offer(runId, d.stepId, decision);
      return this.handleOf(local);
    }
    return this.redrive(runId);
  }

  /**
   * Drive a run that is not executing in this process, from wherever it stands: a queued run from
   * its plan, a suspended one with the recorded cancel or every unapplied decision, any other from
   * its last checkpoint. If another process holds the run's lease, follow it instead (it polls the
   * store for decisions and cancels and applies them).
   */
  private async redrive(runId: string): Promise<RunHandle> {
    const local = this.active.get(runId);
    if (local) return this.handleOf(local);
    const row = await this.store.getRow(runId);
    if (!row) throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
    if (TERMINAL_RUN.has(row.status) && !row.pendingConfirmations.length) return this.follow(runId);
    const input = await this.inputFor(runId, row);
    // another caller in this process may have started it meanwhile (racing duplicate confirms)
    const started = this.active.get(runId);
    if (started) return this.handleOf(started);
    return this.drive(runId, input);
  }

  /** The graph input that continues a run from where its checkpoint stands. */
  private async inputFor(runId: string, row: RunRow): Promise<DriveInput> {
    const snap = await this.stateOf(runId);
    const started = Boolean((snap.values as Partial<RunState>)?.runId);
    const interrupted = Boolean(snap.tasks?.some((t) => (t.interrupts?.length ?? 0) > 0));
    const decisions = started && interrupted && !row.cancelRequest ? await this.recordedDecisions(runId) : {};
    return continueInput(row, { started, interrupted, decisions }, new Date(this.env.now()).toISOString());
  }

  /**
   * Recorded, unapplied decisions as a resume value, each carrying its round (the graph applies
   * a decision only to the wait it answers). Per step, the latest round wins: older ones are stale.
   */
  private async recordedDecisions(runId: string): Promise<Record<string, Decision>> {
    return latestDecisions(await this.store.unappliedDecisions(runId));
  }

  private async lastRound(runId: string, stepId: string): Promise<number | undefined> {
    const snap = await this.stateOf(runId);
    const rec = (snap.values as Partial<RunState>).steps?.[stepId];
    return rec ? rec.waitRound ?? 0 : undefined;
  }

  /**
   * Cancel: a durable request, like a decision. It is recorded on the run (the first reason wins),
   * then applied by whichever process executes the run: this one at once, another within its
   * decision poll, a queued run before any step starts. Running steps are aborted through their
   * signal, then completed steps are compensated. A run that can no longer change answers with its
   * current view.
   */
  async cancel(runId: string, reason = "cancelled by request", acting: Acting = LIBRARY_ACTING): Promise<RunHandle> {
    if (typeof reason !== "string" || reason.length > 2_000) throw new ToolchainError(ErrorCode.INVALID_DECISION, "reason: a string of at most 2000 characters");
    assertStorable(reason, "reason");
    const row = await this.store.getRow(runId);
    if (!row) throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
    if (TERMINAL_RUN.has(row.status) && !row.pendingConfirmations.length) return this.follow(runId);
    await this.store.requestCancel(runId, reason, acting);
    if (!row.cancelRequest) await this.recordCancelEvent(runId, reason, acting);
    const local = this.active.get(runId);
    if (local) {
      await local.ready;
      this.env.controls.cancel(runId, new ToolchainError(ErrorCode.CANCELLED, row.cancelRequest?.reason ?? reason));
      return this.handleOf(local);
    }
    return this.redrive(runId);
  }

  /**
   * The audit trail of a cancel: one `run_cancel_requested` event naming who asked, written when
   * the request is first recorded (the row's first request wins, so racing cancels name the same principal).
   */
  private async recordCancelEvent(runId: string, reason: string, acting: Acting): Promise<void> {
    const stored = (await this.store.getRow(runId))?.cancelRequest;
    const by = stored?.by ?? acting.by;
    const via = stored?.via ?? acting.via;
    await this.store.append(runId, [{ type: EventType.run_cancel_requested, at: new Date(this.env.now()).toISOString(), data: { reason: stored?.reason ?? reason, by, via }, key: "run_cancel_requested" }]);
  }

  /** The run view; live step statuses while it executes in this process; the stored view once checkpoints are pruned. */
  async getRun(runId: string): Promise<RunView> {
    return (await this.inspect(runId)).view;
  }

  /**
   * The run view and whether the run has started: `started` is false while nothing but its
   * record (or the graph input) is stored, and the view is then built from the store alone.
   */
  async inspect(runId: string): Promise<{ view: RunView; started: boolean }> {
    if (runId.includes("\u0000")) throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, "run not found");
    const snap = await this.stateOf(runId);
    const values = snap.values as Partial<RunState>;
    // only the graph input is checkpointed (runId, plan; createdAt and the rest are written by the
    // planner node): not started yet, like a run with no checkpoint (the soak hit this window)
    if (!values?.runId || values.createdAt === undefined) {
      const stored = await this.store.getView(runId);
      if (stored) return { view: stored, started: false };
      const row = await this.store.getRow(runId);
      if (!row) throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
      // recorded, not started yet
      const at = row.createdAt;
      return { view: buildRunView({ runId, plan: row.plan, context: row.context, memory: row.memory, steps: {}, status: row.status, error: null, createdAt: at, updatedAt: at } as unknown as RunState), started: false };
    }
    return { view: await this.liveView(runId, values as RunState), started: true };
  }

  /** A started run's view: its checkpoint, moved forward by the live projection when it executes here. */
  private async liveView(runId: string, values: RunState): Promise<RunView> {
    const view = buildRunView(values);
    const local = this.active.get(runId);
    if (!local) {
      if (!TERMINAL_RUN.has(view.status) || view.pendingConfirmations.length) {
        // a run whose drive failed for good is failed whatever its last checkpoint says
        const row = await this.store.getRow(runId);
        if (row?.error?.code === ErrorCode.DRIVE_FAILED && row.status === "failed") {
          return { ...view, status: "failed", error: row.error, pendingConfirmations: [] };
        }
      }
      return view;
    }
    return local.live.overlay(view);
  }

  events(runId: string, after = 0): Promise<RunEvent[]> {
    return this.store.list(runId, after);
  }

  /**
   * Take over runs that need an executor: queued ones (submitted by an API-only process) and
   * active ones whose owner stopped heartbeating (crashed). Each continues from its checkpoint.
   */
  async recover(limit = 10): Promise<string[]> {
    const claimed = await this.store.claimRunnable(this.owner, this.leaseTtlMs, limit);
    const started: string[] = [];
    for (const runId of claimed) {
      if (this.active.has(runId)) continue;
      try {
        const row = await this.store.getRow(runId);
        if (!row) continue;
        // the lease was taken by claimRunnable; the drive renews and releases it
        this.drive(runId, await this.inputFor(runId, row)).result.catch(() => undefined);
        started.push(runId);
      } catch {
        await this.store.releaseLease(runId, this.owner).catch(() => undefined);
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
      { room: (max) => max - this.active.size, recover: (n) => this.recover(n), prune: (olderThanMs) => this.pruneCheckpoints({ olderThanMs }), now: () => this.env.now() },
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

  /** A decision or a cancel recorded for a suspended run that no drive has applied yet. */
  private async hasRequestToApply(runId: string, row: RunRow): Promise<boolean> {
    if (!row.pendingConfirmations.length) return false;
    if (row.cancelRequest) return true;
    const ids = new Set(row.pendingConfirmations.map((p) => p.stepId));
    return (await this.store.unappliedDecisions(runId)).some((d) => ids.has(d.stepId));
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
      hasRequestToApply: (row) => this.hasRequestToApply(runId, row),
      view: () => this.getRun(runId),
      resume: async () => (await this.redrive(runId)).result,
    });
  }

  /** The run's graph state, read outside any graph the caller may be running in (see outsideCallerContext). */
  private stateOf(runId: string) {
    return outsideCallerContext(() => this.graph.getState({ configurable: { thread_id: runId } }));
  }

  private drive(runId: string, input: DriveInput, created?: Promise<void>): RunHandle {
    if (this.active.has(runId)) throw new ToolchainError(ErrorCode.RUN_NOT_ACTIVE, `run ${runId} is already being executed by this process`);
    const deps = {
      graph: this.graph,
      store: this.store,
      controls: this.env.controls,
      owner: this.owner,
      leaseTtlMs: this.leaseTtlMs,
      decisionPollMs: this.decisionPollMs,
      driveRetry: this.driveRetry,
      writesSettled: (id: string) => this.writes.settled(id),
      view: async (id: string) => buildRunView((await this.stateOf(id)).values as RunState),
    };
    let drive!: Drive;
    const after = () => {
      if (this.active.get(runId) === drive) this.active.delete(runId);
    };
    if (created) {
      // the history row must exist before the drive takes the lease
      const store = this.store;
      const wrapped: typeof store = Object.create(store);
      wrapped.acquireLease = async (...a) => (await created, store.acquireLease(...a));
      drive = startDrive({ ...deps, store: wrapped }, runId, input, after);
    } else drive = startDrive(deps, runId, input, after);
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
   * A drive settled. A decision or cancel recorded while it was finishing (after its scheduler
   * stopped listening) would otherwise wait for nobody: resume at once, and answer every holder of
   * this handle with the outcome of that resume.
   */
  private async afterDrive(runId: string, view: RunView): Promise<RunView> {
    if (!view.pendingConfirmations.length || this.active.has(runId)) return view;
    const row = await this.store.getRow(runId).catch(() => undefined);
    if (!row || row.leaseOwner || !(await this.hasRequestToApply(runId, row).catch(() => false))) return view;
    return (await this.redrive(runId)).result;
  }

  /** A drive threw: follow another owner, answer the failed run, or re-drive after the backoff. */
  private async afterFailure(runId: string, e: unknown, released?: AbortController): Promise<RunView> {
    if (isLeaseBusy(e)) return this.follow(runId, released).result;
    if (e instanceof DriveFailedError) {
      if (!e.outcome) return this.follow(runId).result; // not ours any more, or the database is away: its lease expires
      if (e.outcome.final) return this.getRun(runId);
      await new Promise((r) => setTimeout(r, e.outcome!.retryInMs));
      return (await this.redrive(runId)).result;
    }
    if (isLeaseLost(e)) return this.follow(runId).result;
    throw e;
  }
}

export function createRuntime(opts: RuntimeOptions = {}): Runtime {
  return new Runtime(opts);
}
