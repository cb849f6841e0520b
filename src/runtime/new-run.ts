/**
 * What starting or continuing a run writes and feeds the graph, as plain data: the run's record
 * for the store and the graph input with the run's seed (workspace, allowlist, admission). Pure:
 * the Runtime records the result and drives it.
 */
import { randomUUID } from "node:crypto";
import { Command } from "@langchain/langgraph";
import type { ResumeValue } from "../kernel/resume.js";
import type { RunSeed } from "../kernel/run-state.js";
import type { Decision } from "../kernel/decision.js";
import { DEFAULT_WORKSPACE } from "../kernel/workspace.js";
import type { Admission, Requester } from "../plan/admission.js";
import { LIBRARY_ACTING } from "../kernel/actor.js";

/** The run's requester as recorded (library callers that say nothing: the library). */
function requesterOf(opts: RunOptions): Requester {
  const a = opts.requestedBy ?? LIBRARY_ACTING;
  return { ...a.by, via: a.via };
}
import type { CompiledPlan } from "../plan/validate.js";
import type { SkillRegistry } from "../skills/registry.js";
import type { NewRun, RunRow } from "../store/run-store.js";
import type { DriveInput } from "./driver.js";
import type { RunOptions } from "./options.js";

export interface NewRunParts {
  runId: string;
  input: DriveInput;
  record: NewRun;
}

/** Names of the skills both allowlists admit; undefined when neither restricts. */
export function allowedSkillNames(
  registry: Pick<SkillRegistry, "list">,
  global?: (name: string) => boolean,
  call?: (name: string) => boolean,
): string[] | undefined {
  if (!global && !call) return undefined;
  return registry
    .list()
    .map((s) => s.name)
    .filter((n) => (!global || global(n)) && (!call || call(n)));
}

const traceOf = (opts: RunOptions) => opts.traceId ?? randomUUID().replace(/-/g, "");

/** A run of a validated, admitted plan. */
export function newPlanRun(
  compiled: CompiledPlan & { admission: Admission },
  opts: RunOptions,
  now: string,
): NewRunParts {
  const admission: Admission = { ...compiled.admission, requestedBy: requesterOf(opts) };
  const runId = opts.runId ?? randomUUID();
  const workspaceId = opts.workspaceId ?? DEFAULT_WORKSPACE;
  const input: DriveInput = {
    input: {
      runId,
      plan: compiled.plan,
      context: (opts.context ?? {}) as Record<string, unknown>,
      memory: opts.memory ?? {},
    },
    seed: { workspaceId, createdAt: now, admission },
  };
  return {
    runId,
    input,
    record: {
      runId,
      workspaceId,
      traceId: traceOf(opts),
      ...(opts.traceContext ? { traceContext: opts.traceContext } : {}),
      plan: compiled.plan,
      context: opts.context ?? {},
      memory: opts.memory ?? {},
      admission,
    },
  };
}

/** A run from a request: no plan in the graph's input, the planner node plans it. */
export function newRequestRun(
  request: string,
  opts: RunOptions,
  allowedSkills: string[] | null,
  now: string,
): NewRunParts {
  const runId = opts.runId ?? randomUUID();
  // until the planner node writes it, the run's plan is its request
  const plan = {
    goal: request.slice(0, 10_000),
    steps: [],
    onFailure: "skip_dependents",
    rollbackMode: "best_effort",
  } as unknown as CompiledPlan["plan"];
  const workspaceId = opts.workspaceId ?? DEFAULT_WORKSPACE;
  // the plan will be the planner's (author: model); who asked is kept with the request
  const admission: Admission = {
    author: { kind: "model", via: "planner" },
    warnings: [],
    requestedBy: requesterOf(opts),
  };
  const input: DriveInput = {
    input: { runId, request, context: (opts.context ?? {}) as Record<string, unknown>, memory: opts.memory ?? {} },
    seed: { workspaceId, allowedSkills, createdAt: now, admission },
  };
  return {
    runId,
    input,
    record: {
      runId,
      workspaceId,
      traceId: traceOf(opts),
      ...(opts.traceContext ? { traceContext: opts.traceContext } : {}),
      plan,
      context: opts.context ?? {},
      memory: opts.memory ?? {},
      planningInput: { request, allowedSkills },
      admission,
    },
  };
}

/**
 * The graph input that continues a recorded run from where its checkpoint stands: its record
 * when nothing is checkpointed, nothing (re-run from the checkpoint) when it is not interrupted,
 * else the recorded cancel or the recorded decisions as the resume value.
 */
export function continueInput(
  row: RunRow,
  at: { started: boolean; interrupted: boolean; decisions: Record<string, Decision> },
  now: string,
): DriveInput {
  // every drive carries the run's seed: a process that died while the planner node ran (only the
  // input checkpointed) continues it from the checkpoint, and the planner must still see the
  // run's workspace and allowlist
  const seed: RunSeed = {
    workspaceId: row.workspaceId,
    allowedSkills: row.planningInput ? row.planningInput.allowedSkills : null,
    createdAt: now,
    ...(row.admission ? { admission: row.admission } : {}),
  };
  if (!at.started) {
    const base = {
      runId: row.runId,
      context: (row.context ?? {}) as Record<string, unknown>,
      memory: row.memory ?? {},
    };
    // a run from a request that never started: the planner node plans it
    if (row.planningInput) return { input: { ...base, request: row.planningInput.request }, seed };
    return { input: { ...base, plan: row.plan }, seed };
  }
  if (!at.interrupted) return { input: null, seed };
  if (row.cancelRequest)
    return {
      input: new Command({
        resume: {
          cancel: true,
          reason: row.cancelRequest.reason,
          ...(row.cancelRequest.by ? { by: row.cancelRequest.by } : {}),
          ...(row.cancelRequest.via ? { via: row.cancelRequest.via } : {}),
        } satisfies ResumeValue,
      }),
      seed,
    };
  return { input: new Command({ resume: { decisions: at.decisions } satisfies ResumeValue }), seed };
}
