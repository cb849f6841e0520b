/**
 * The library entry point: `createRuntime({ skills, checkpointer })`. Every surface (API, agent
 * tool, CLI) goes through this object; the graph does the work, this file validates at the
 * boundary, drives the graph's stream and turns its custom-stream chunks into numbered events.
 */
import { randomUUID } from "node:crypto";
import { isDeepStrictEqual } from "node:util";
import { Command, MemorySaver, type BaseCheckpointSaver } from "@langchain/langgraph";
import { z } from "zod";
import { DecisionSchema, type ResumeValue } from "../../graphs/approval-node.js";
import { defaultEnv, type RuntimeEnv } from "../../graphs/env.js";
import type { Decision, RunState } from "../../graphs/state.js";
import { compileToolchainGraph } from "../../graphs/toolchain.js";
import { coreSkills } from "../../skills/core/index.js";
import { Channel } from "../kernel/channel.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { isTaggedEvent, EVENT_TAG, type RunEvent } from "../kernel/events.js";
import { TERMINAL_RUN } from "../kernel/status.js";
import { compilePlan, type CompiledPlan } from "../plan/validate.js";
import type { Skill } from "../skills/contract.js";
import { SkillRegistry } from "../skills/registry.js";
import { MemoryEventLog, type EventLog } from "../store/event-log.js";
import { LiveProjection } from "./live-projection.js";
import { buildRunView, type RunView } from "./view.js";

export interface RuntimeOptions {
  /** Extra skills (core.* are always present), or a registry to use as is. */
  skills?: Skill[] | SkillRegistry;
  /** @default new MemorySaver() */
  checkpointer?: BaseCheckpointSaver;
  /** @default in-memory */
  eventLog?: EventLog;
  /** Workspace allowlist enforced by validation. */
  allowSkill?: (name: string) => boolean;
  env?: Partial<Omit<RuntimeEnv, "registry">>;
}

export interface RunOptions {
  context?: unknown;
  memory?: Record<string, unknown>;
  runId?: string;
}

export interface RunHandle {
  runId: string;
  /** Events of this drive of the run, as they happen (numbered by the event log). */
  events: AsyncIterable<RunEvent>;
  /** The run view when the run is terminal or waits for confirmation. */
  result: Promise<RunView>;
}

export interface ConfirmInput {
  stepId: string;
  decision: "approve" | "reject";
  arguments?: Record<string, unknown>;
  comment?: string;
}

export const ConfirmInputSchema = z
  .object({
    stepId: z.string().min(1),
    decision: z.enum(["approve", "reject"]),
    arguments: z.record(z.string(), z.unknown()).optional(),
    comment: z.string().max(4_000).optional(),
  })
  .strict();

export class Runtime {
  readonly registry: SkillRegistry;
  readonly env: RuntimeEnv;
  readonly eventLog: EventLog;
  private readonly graph: ReturnType<typeof compileToolchainGraph>;
  /** Runs this process is executing now, with their live projection (ready once seeded). */
  private readonly active = new Map<string, { handle: RunHandle; live: LiveProjection; ready: Promise<void> }>();
  private readonly allowSkill?: (name: string) => boolean;

  constructor(opts: RuntimeOptions = {}) {
    this.registry = opts.skills instanceof SkillRegistry ? opts.skills : new SkillRegistry([...coreSkills, ...(opts.skills ?? [])]);
    this.env = defaultEnv(this.registry, opts.env);
    this.eventLog = opts.eventLog ?? new MemoryEventLog();
    this.graph = compileToolchainGraph(this.env, opts.checkpointer ?? new MemorySaver());
    this.allowSkill = opts.allowSkill;
  }

  /** Validate only: throws PlanValidationError with a stable code. */
  validate(plan: unknown, opts: RunOptions = {}): CompiledPlan {
    return compilePlan(plan, { registry: this.registry, allowSkill: this.allowSkill, context: opts.context, memory: opts.memory });
  }

  /** Validates synchronously (throws before anything is created), then starts the run. */
  run(plan: unknown, opts: RunOptions = {}): RunHandle {
    const compiled = this.validate(plan, opts);
    const runId = opts.runId ?? randomUUID();
    const now = new Date(this.env.now()).toISOString();
    const input: Partial<RunState> = {
      runId,
      plan: compiled.plan,
      context: opts.context ?? {},
      memory: opts.memory ?? {},
      status: "queued",
      createdAt: now,
      updatedAt: now,
    };
    return this.drive(runId, input);
  }

  /**
   * Answer a confirmation. A decision for a step that is not waiting is refused with
   * CONFIRMATION_NOT_PENDING, except an exact repeat of the decision already applied, which
   * answers with the current state and resumes nothing.
   */
  async confirm(runId: string, input: ConfirmInput): Promise<RunHandle> {
    const parsed = ConfirmInputSchema.safeParse(input);
    if (!parsed.success) throw new ToolchainError(ErrorCode.INVALID_DECISION, `invalid decision: ${z.prettifyError(parsed.error).replace(/\n/g, "; ")}`);
    const d = parsed.data;
    const state = await this.state(runId);
    const decision: Decision = { decision: d.decision, ...(d.arguments ? { arguments: d.arguments } : {}), ...(d.comment ? { comment: d.comment } : {}) };
    const same = (prev: Decision | undefined) => prev !== undefined && isDeepStrictEqual({ ...prev, at: undefined }, { ...decision, at: undefined });
    const active = this.active.get(runId);
    await active?.ready;
    const waiting = active ? active.live.pending.has(d.stepId) : state.steps[d.stepId]?.status === "waiting_confirmation";
    if (!waiting) {
      if (same(active?.live.decided.get(d.stepId) ?? state.decisions[d.stepId])) return this.follow(runId);
      throw new ToolchainError(ErrorCode.CONFIRMATION_NOT_PENDING, `step "${d.stepId}" of run ${runId} is not waiting for confirmation`);
    }
    if (d.decision === "approve" && d.arguments) {
      const step = state.plan.steps.find((s) => s.stepId === d.stepId)!;
      const skill = this.registry.get(step.skillName)!;
      const r = skill.input.safeParse(d.arguments);
      if (!r.success) {
        throw new ToolchainError(ErrorCode.INVALID_ARGUMENTS, `edited arguments do not match ${skill.name}: ${z.prettifyError(r.error).replace(/\n/g, "; ")}`);
      }
    }
    decision.at = new Date(this.env.now()).toISOString();
    if (active) {
      // the scheduler is still busy on other branches: hand it the decision directly
      active.live.pending.delete(d.stepId);
      active.live.decided.set(d.stepId, decision);
      this.env.controls.offer(runId, d.stepId, decision);
      return active.handle;
    }
    const resume: ResumeValue = { decisions: { [d.stepId]: decision } };
    return this.drive(runId, new Command({ resume }));
  }

  /** Cancel: running steps are aborted through their signal, then completed steps compensated. */
  async cancel(runId: string, reason = "cancelled by request"): Promise<RunHandle> {
    const state = await this.state(runId);
    if (TERMINAL_RUN.has(state.status)) return this.follow(runId);
    const active = this.active.get(runId);
    this.env.controls.cancel(runId, new ToolchainError(ErrorCode.CANCELLED, reason));
    if (active) return active.handle;
    // suspended at an interrupt (or not driven by this process): resume into cancellation
    const resume: ResumeValue = { cancel: true, reason };
    return this.drive(runId, new Command({ resume }));
  }

  /** The run view; for a run executing in this process, step statuses are live (from its events). */
  async getRun(runId: string): Promise<RunView> {
    const view = buildRunView(await this.state(runId));
    const active = this.active.get(runId);
    if (!active) return view;
    for (const s of view.steps) s.status = active.live.status.get(s.stepId) ?? s.status;
    view.pendingConfirmations = [...active.live.pending.values()];
    if (view.status === "queued" || view.status === "waiting_confirmation") view.status = "running";
    return view;
  }

  events(runId: string, after = 0): Promise<RunEvent[]> {
    return this.eventLog.list(runId, after);
  }

  private async state(runId: string): Promise<RunState> {
    const snap = await this.graph.getState({ configurable: { thread_id: runId } });
    const values = snap.values as Partial<RunState>;
    if (!values || !values.runId) throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
    return values as RunState;
  }

  /** A handle on a run without driving it: the active drive, or the current view. */
  private follow(runId: string): RunHandle {
    const active = this.active.get(runId);
    if (active) return active.handle;
    const events = new Channel<RunEvent>();
    events.close();
    return { runId, events, result: this.getRun(runId) };
  }

  private drive(runId: string, input: Partial<RunState> | Command): RunHandle {
    if (this.active.has(runId)) throw new ToolchainError(ErrorCode.RUN_NOT_ACTIVE, `run ${runId} is already being executed by this process`);
    const events = new Channel<RunEvent>();
    const live = new LiveProjection();
    const ready = input instanceof Command ? this.state(runId).then((s) => live.seed(buildRunView(s).pendingConfirmations)) : Promise.resolve();
    const result = (async () => {
      try {
        await ready;
        const stream = await this.graph.stream(input as never, {
          configurable: { thread_id: runId },
          streamMode: ["custom"],
          recursionLimit: 1_000_000,
        });
        for await (const chunk of stream as AsyncIterable<[string, unknown]>) {
          const [, payload] = chunk;
          if (!isTaggedEvent(payload)) continue;
          for (const ev of await this.eventLog.append(runId, [payload[EVENT_TAG]])) {
            live.apply(ev);
            events.push(ev);
          }
        }
        this.active.delete(runId);
        const view = await this.getRun(runId);
        events.close();
        return view;
      } catch (e) {
        events.fail(e);
        throw e;
      } finally {
        this.active.delete(runId);
      }
    })();
    const handle: RunHandle = { runId, events, result };
    this.active.set(runId, { handle, live, ready: ready.catch(() => undefined) });
    result.catch(() => undefined); // surfaced to whoever awaits handle.result
    return handle;
  }
}

export function createRuntime(opts: RuntimeOptions = {}): Runtime {
  return new Runtime(opts);
}
