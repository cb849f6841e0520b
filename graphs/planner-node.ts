/**
 * Planning. Only a `{ request }` input visits the planner node (graphs/toolchain.ts `entry`): it plans the request
 * (src/planner: the model, a repair round, the deterministic fallback) and writes the validated
 * plan into state, so the API, the CLI, agents and LangGraph Studio all plan the same way. A
 * given plan goes straight to the scheduler, whose first execution accepts it (`acceptGivenPlan`:
 * admitted, validated again so a plan edited in Studio cannot skip validation, versions pinned):
 * a run with a plan spends no superstep on planning.
 *
 * The planning result is saved with the node's checkpoint: a run resumed after a crash during
 * execution keeps its plan; a crash during planning plans again (nothing has run yet).
 */
import { inContext } from "../src/telemetry/tracing.js";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { ErrorCode, toStepError, ToolchainError } from "../src/kernel/errors.js";
import { EventType } from "../src/kernel/events.js";
import { admitPlan, LIBRARY_AUTHOR, type Admission, type PlanAuthor } from "../src/plan/admission.js";
import { compilePlanAsync } from "../src/plan/validate.js";
import { pinVersions } from "../src/skills/version.js";
import { emitter } from "./emit.js";
import { finishRun } from "./finish.js";
import { compiledAs, compiledFor, type RuntimeEnv } from "./env.js";
import { seedOf, SEED_KEY, threadIdOf } from "./io.js";
import type { PlanningRecord, RunState, RunUpdate } from "./state.js";
import { isoAt } from "../src/kernel/iso-time.js";

/** A plan given to the graph itself, not through the runtime: an agent's (clamped and budgeted). */
const STUDIO_AUTHOR: PlanAuthor = { kind: "agent", via: "studio" };
/** The planner's plan: the model's, whoever asked (the fallback planner's plans are held to the same rules). */
const MODEL_AUTHOR: PlanAuthor = { kind: "model", via: "planner" };

const hasSteps = (plan: unknown) =>
  Array.isArray((plan as { steps?: unknown } | undefined)?.steps) && (plan as { steps: unknown[] }).steps.length > 0;

/** The request to plan: only an input without a plan of its own has one. */
export function requestOf(state: Pick<RunState, "plan" | "request">): string | undefined {
  if (hasSteps(state.plan)) return undefined;
  return typeof state.request === "string" && state.request.trim() !== "" ? state.request : undefined;
}

/** Nothing has run yet: the input reached the scheduler without a planner before it (graphs/toolchain.ts `entry`). */
export const unplanned = (state: RunState): boolean => state.status === undefined;

/**
 * What every run knows before its plan: run facts a caller cannot choose come from the runtime's
 * seed (graphs/io.ts); invoked as a bare LangGraph graph (Studio, the SDK) there is none: the
 * thread is the run. `fail` records a failure for the runtime (history, events) or, in a bare
 * graph invocation, ends the LangGraph run in error so Studio shows it red with the code.
 */
function runFacts(input: RunState, config: LangGraphRunnableConfig, env: RuntimeEnv) {
  const at = () => isoAt(env.now());
  const seed = seedOf(config);
  const driven = SEED_KEY in (config.configurable ?? {});
  const runId = input.runId ?? threadIdOf(config) ?? "run";
  const facts: RunUpdate = {
    runId,
    workspaceId: seed.workspaceId ?? input.workspaceId,
    allowedSkills: seed.allowedSkills !== undefined ? seed.allowedSkills : input.allowedSkills,
    createdAt: input.createdAt ?? seed.createdAt ?? at(),
  };
  const state: RunState = { ...input, ...facts } as RunState;
  const fail = (e: unknown): RunUpdate => {
    if (!driven) {
      const err = toStepError(e);
      throw new ToolchainError(err.code, `${err.code}: ${err.message}`, { details: err.details });
    }
    return { ...facts, status: "failed", error: toStepError(e), updatedAt: at() };
  };
  return { seed, driven, runId, facts, state, fail, at };
}

/**
 * A given plan, accepted (or the run failed: `status: "failed"`). The runtime admitted it for its
 * author (the seed says who); a plan given to the graph directly (Studio, the SDK, a parent
 * graph) is an agent's, and is admitted here.
 */
export async function acceptGivenPlan(
  input: RunState,
  config: LangGraphRunnableConfig,
  env: RuntimeEnv,
): Promise<RunUpdate> {
  const { seed, driven, runId, facts, state, fail, at } = runFacts(input, config, env);
  const emit = emitter(config, env);
  emit(EventType.planning_started, undefined, { source: "given" });
  try {
    if (state.plan === undefined)
      throw new ToolchainError(ErrorCode.PLAN_INVALID, "the run has neither a plan nor a request to plan");
    const admitted = seed.admission
      ? { plan: state.plan as unknown, admission: seed.admission }
      : admitPlan(
          state.plan,
          driven ? LIBRARY_AUTHOR : STUDIO_AUTHOR,
          (n) => env.registry.get(n),
          env.planner.config,
          env.planBudget,
        );
    const compiled = await compiledFor(env, runId, admitted.plan, () =>
      compilePlanAsync(admitted.plan, { registry: env.registry, context: state.context, memory: state.memory }),
    );
    const { author, warnings } = admitted.admission;
    emit(EventType.planning_completed, undefined, {
      steps: compiled.steps.length,
      author,
      ...(warnings.length ? { warnings } : {}),
    });
    return {
      ...facts,
      plan: compiledAs(env, runId, admitted.plan) ? (admitted.plan as typeof compiled.plan) : compiled.plan,
      admission: admitted.admission,
      skillVersions: pinVersions(compiled.plan, (n) => env.registry.get(n)),
      status: "running",
      updatedAt: at(),
    };
  } catch (e) {
    return fail(e);
  }
}

export function makePlannerNode(env: RuntimeEnv) {
  return async function planner(input: RunState, config: LangGraphRunnableConfig): Promise<RunUpdate> {
    const request = requestOf(input);
    // only a checkpoint written before the graph's `entry` router existed brings a given plan here
    const out = request === undefined ? await acceptGivenPlan(input, config, env) : await plan(input, request, config);
    return out.status === "failed" ? finishRun(input, out, emitter(config, env, input), env) : out;
  };

  async function plan(input: RunState, request: string, config: LangGraphRunnableConfig): Promise<RunUpdate> {
    const { seed, driven, runId, facts, state, fail, at } = runFacts(input, config, env);
    const emit = emitter(config, env);

    const model = env.planner.model;
    emit(EventType.planning_started, undefined, { source: "planner", request, ...(model ? { model } : {}) });
    const allowed = Array.isArray(state.allowedSkills) ? new Set(state.allowedSkills) : undefined;
    // a cancel while the model thinks aborts the call (the run then fails with CANCELLED: nothing ran)
    const cancel = env.controls.signal(runId);
    const signal = config.signal ? AbortSignal.any([config.signal, cancel]) : cancel;
    try {
      // the `plan` span is a child of this drive's span (src/telemetry)
      const out = await inContext(env.controls.traceContext(runId), () =>
        env.planner.plan({
          request,
          context: state.context ?? {},
          memory: state.memory,
          allowSkill: allowed ? (name) => allowed.has(name) : undefined,
          workspaceId: state.workspaceId,
          signal,
        }),
      );
      const planning: PlanningRecord = {
        ...out.planner,
        warnings: out.warnings,
        ...(out.usage ? { usage: out.usage } : {}),
        repairRounds: out.repairRounds,
        durationMs: out.durationMs,
      };
      // who asked stays with the run when the model writes its plan
      const admission: Admission = {
        author: MODEL_AUTHOR,
        warnings: out.warnings,
        ...(seed.admission?.requestedBy ? { requestedBy: seed.admission.requestedBy } : {}),
      };
      emit(EventType.planning_completed, undefined, {
        steps: out.plan.steps.length,
        author: MODEL_AUTHOR,
        planner: out.planner,
        warnings: out.warnings,
        usage: out.usage ?? null,
        durationMs: out.durationMs,
        repairRounds: out.repairRounds,
        plan: out.plan,
      });
      return {
        ...facts,
        plan: out.plan,
        planning,
        admission,
        skillVersions: pinVersions(out.plan, (n) => env.registry.get(n)),
        status: "running",
        updatedAt: at(),
      };
    } catch (e) {
      if (config.signal?.aborted) throw e; // the drive stopped (lease lost, shutdown): plan again on resume
      const error = cancel.aborted
        ? toStepError(cancel.reason ?? new ToolchainError(ErrorCode.CANCELLED, "cancelled while planning"))
        : toStepError(e);
      emit(EventType.planning_failed, undefined, { error, ...(model ? { model } : {}) });
      if (!driven) return fail(error);
      return {
        ...facts,
        plan: state.plan ?? {
          goal: request.slice(0, 10_000),
          steps: [] as never,
          onFailure: "skip_dependents",
          rollbackMode: "best_effort",
        },
        status: "failed",
        error,
        updatedAt: at(),
      };
    }
  }
}
