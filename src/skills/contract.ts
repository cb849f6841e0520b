/**
 * The skill contract: one definition serves the kernel, the planner's manifest, the API and agents.
 */
import type { Context } from "@opentelemetry/api";
import type { z } from "zod";
import type { ApprovalPolicy } from "../kernel/approval-policy.js";

export type SideEffects = "none" | "read" | "write" | "external";

export interface SkillLogger {
  debug(msg: string, data?: Record<string, unknown>): void;
  info(msg: string, data?: Record<string, unknown>): void;
  warn(msg: string, data?: Record<string, unknown>): void;
  error(msg: string, data?: Record<string, unknown>): void;
}

export interface SkillContext {
  runId: string;
  stepId: string;
  /** 1-based attempt number of this execution. */
  attempt: number;
  /** Stable across retries, resumes and process restarts of the same run step: pass it to providers. */
  idempotencyKey: string;
  /** Aborted on step timeout, plan deadline, fail_fast and cancellation. */
  signal: AbortSignal;
  logger: SkillLogger;
  /** The run's context (read-only view). */
  context: unknown;
  /** The workspace the run belongs to (DEFAULT_WORKSPACE, src/kernel/workspace.ts, for runs started without one). */
  workspaceId: string;
  /**
   * The OpenTelemetry context of this execution's `execute_tool` span (tracing on; the skill also
   * runs under it as the active context, so instrumented clients pick it up).
   */
  traceContext?: Context;
  /** W3C `traceparent` / `tracestate` headers for an outgoing request of this execution ({} when tracing is off). */
  traceHeaders(): Record<string, string>;
}

export interface CreatedRecord {
  /** e.g. a table id */
  resource: string;
  id: string;
}

export interface CompensationContext<I, O> {
  runId: string;
  stepId: string;
  /** The run's workspace: a compensation touches nothing outside it. */
  workspaceId: string;
  /** The idempotency key of the execution being undone (what the store knows the effect by). */
  effectKey: string;
  idempotencyKey: string;
  signal: AbortSignal;
  logger: SkillLogger;
  input: I;
  output: O;
}

export interface Skill<I = any, O = any> {
  name: string;
  description: string;
  input: z.ZodType<I>;
  output?: z.ZodType<O>;
  sideEffects: SideEffects;
  /** Executing twice with the same idempotency key has the effect of executing once. */
  idempotent: boolean;
  /** false: at most one step of this skill runs at a time, in every run of the workspace. @default true */
  parallelSafe?: boolean;
  /** Steps whose serial keys are equal never overlap, in any run of the workspace, in any process. */
  serialKey?(args: I): string | undefined;
  /**
   * A named concurrency group shared by every skill naming it, across the runs of a workspace (e.g.
   * a provider's limits): at most `limit` steps at once, and at most `perSecond` starts in any
   * rolling second when set.
   */
  resource?: { name: string; limit: number; perSecond?: number };
  requiresConfirmation?: boolean | ((args: I) => boolean);
  /** Who may decide this skill's confirmations, and how many must approve (src/kernel/approval-policy.ts). */
  approval?: ApprovalPolicy;
  /** What the step would do, computed without side effects; shown to the approver. */
  preview?(args: I, ctx: Omit<SkillContext, "attempt" | "traceContext" | "traceHeaders">): Promise<unknown> | unknown;
  /** Undo a completed execution. Absent on a side-effecting skill means "not compensable". */
  compensate?(c: CompensationContext<I, O>): Promise<void>;
  /**
   * Record-creating skills: which records an execution created (read from what it returned) and
   * how to delete exactly those. Enables rollback `delete_created_records`, which is then the
   * default compensation (unless `compensate` is given).
   */
  createdRecords?: {
    list(output: O, input: I): CreatedRecord[];
    delete(records: CreatedRecord[], c: CompensationContext<I, O>): Promise<void>;
  };
  /**
   * After a crash in the middle of an attempt of a non-idempotent side-effecting step: did the
   * effect for this idempotency key happen? `undefined` = cannot tell (a human decides).
   */
  reconcile?(c: {
    runId: string;
    stepId: string;
    idempotencyKey: string;
    workspaceId: string;
    input: I;
    signal: AbortSignal;
    logger: SkillLogger;
  }): Promise<{ applied: true; output: O } | { applied: false } | undefined>;
  /**
   * The skill's declared version (semver; default "1.0.0"). A run pins, when it is planned, each of
   * its skills' version and schema hash (src/skills/version.ts); a process drives it only with a
   * compatible one.
   */
  version?: string;
  /** Older versions whose runs this version may take over (their pending arguments go through `migrate` when given). */
  compatibleWith?: readonly string[];
  /**
   * Arguments resolved for `fromVersion` (a run planned against it) rewritten for this version;
   * the result is validated against this version's input schema before use.
   */
  migrate?(args: Record<string, unknown>, fromVersion: string): Record<string, unknown>;
  /** Expected duration, used to prioritise the critical path when concurrency is limited. */
  estimateDurationMs?(args: I): number | undefined;
  execute(args: I, ctx: SkillContext): Promise<O>;
}

/** Identity helper that keeps input/output types inferred from the zod schemas. */
export function defineSkill<IS extends z.ZodType, OS extends z.ZodType = z.ZodType<unknown>>(
  skill: Omit<Skill<z.output<IS>, z.output<OS>>, "input" | "output"> & { input: IS; output?: OS },
): Skill<z.output<IS>, z.output<OS>> {
  return skill as unknown as Skill<z.output<IS>, z.output<OS>>;
}

export function hasSideEffects(s: Pick<Skill, "sideEffects">): boolean {
  return s.sideEffects === "write" || s.sideEffects === "external";
}
