/**
 * One error vocabulary for plans, steps, the API and the database.
 * Check errors by `code`, never by `instanceof` across packages.
 */
import type { Actor, Via } from "./actor.js";
import { findUnstorable, storableText } from "./json-safety.js";

export const ErrorCode = {
  // plan validation (400 at the API)
  PLAN_INVALID: "PLAN_INVALID",
  PLAN_TOO_LARGE: "PLAN_TOO_LARGE",
  UNKNOWN_SKILL: "UNKNOWN_SKILL",
  UNKNOWN_DEPENDENCY: "UNKNOWN_DEPENDENCY",
  DUPLICATE_STEP_ID: "DUPLICATE_STEP_ID",
  DUPLICATE_RESULT_KEY: "DUPLICATE_RESULT_KEY",
  SELF_DEPENDENCY: "SELF_DEPENDENCY",
  PLAN_CYCLE: "PLAN_CYCLE",
  INVALID_REFERENCE: "INVALID_REFERENCE",
  /** A `$ref` into a step's output names a field that the skill's declared output schema cannot have. */
  UNKNOWN_OUTPUT_FIELD: "UNKNOWN_OUTPUT_FIELD",
  INVALID_ARGUMENTS: "INVALID_ARGUMENTS",
  SKILL_NOT_ALLOWED: "SKILL_NOT_ALLOWED",
  NOT_COMPENSABLE: "NOT_COMPENSABLE",
  /** A plan removes a confirmation its author may not remove (src/kernel/confirmation.ts `mayRelax`). */
  CONFIRMATION_REQUIRED: "CONFIRMATION_REQUIRED",
  /** A model- or agent-written plan over its workspace's budget (steps, confirmations, fan-out). */
  PLAN_OVER_BUDGET: "PLAN_OVER_BUDGET",
  /** A step id or saveResultAs key that names an Object.prototype member (`constructor`, `toString`, …). */
  RESERVED_ID: "RESERVED_ID",
  /** A value the run history cannot store (NUL, lone surrogate, bigint, NaN, too deep, `__proto__` key). */
  UNSUPPORTED_VALUE: "UNSUPPORTED_VALUE",
  /** A value (resolved arguments, output, preview, context…) over the byte budget `TOOLCHAIN_MAX_VALUE_BYTES`. */
  VALUE_TOO_LARGE: "VALUE_TOO_LARGE",
  // step execution
  INVALID_INPUT: "INVALID_INPUT",
  INVALID_OUTPUT: "INVALID_OUTPUT",
  EXECUTION_FAILED: "EXECUTION_FAILED",
  TRANSIENT: "TRANSIENT",
  TIMEOUT: "TIMEOUT",
  RATE_LIMITED: "RATE_LIMITED",
  DEADLINE_EXCEEDED: "DEADLINE_EXCEEDED",
  CANCELLED: "CANCELLED",
  REJECTED: "REJECTED",
  /** A step in doubt (its process died after the intent claim) under a halt, whose skill cannot tell whether its effect happened. */
  EFFECT_UNKNOWN: "EFFECT_UNKNOWN",
  // runtime / API
  RUN_NOT_FOUND: "RUN_NOT_FOUND",
  CONFIRMATION_NOT_PENDING: "CONFIRMATION_NOT_PENDING",
  INVALID_DECISION: "INVALID_DECISION",
  /** The step's approval policy does not let this principal decide (its roles or users). */
  NOT_ALLOWED_TO_DECIDE: "NOT_ALLOWED_TO_DECIDE",
  /** The policy says `allowRequester: false` and this principal started the run. */
  REQUESTER_CANNOT_APPROVE: "REQUESTER_CANNOT_APPROVE",
  RUN_NOT_ACTIVE: "RUN_NOT_ACTIVE",
  /** Redrive refused: the run is not failed (running, waiting, completed…) or has no step to run again. */
  RUN_NOT_REDRIVABLE: "RUN_NOT_REDRIVABLE",
  /** Redrive refused: another process is executing the run (it holds the run's lease). */
  RUN_BEING_DRIVEN: "RUN_BEING_DRIVEN",
  /** Redrive refused: the run's completed steps were compensated; running the rest again would not undo that. */
  REDRIVE_COMPENSATED: "REDRIVE_COMPENSATED",
  /** No process had a compatible version of a skill the run is pinned to within the grace period (names both versions). */
  SKILL_VERSION_UNAVAILABLE: "SKILL_VERSION_UNAVAILABLE",
  /** `runs migrate`: the skill declares no migration from the version a run's arguments are for. */
  MIGRATION_UNAVAILABLE: "MIGRATION_UNAVAILABLE",
  /** Redrive overrides that name no failed step or do not match the skill's input schema. */
  INVALID_REDRIVE: "INVALID_REDRIVE",
  /** The run could not be executed or persisted (its drive failed repeatedly): a run error, not a request error. */
  DRIVE_FAILED: "DRIVE_FAILED",
  INTERNAL: "INTERNAL",
  // HTTP API (src/api/errors.ts maps every code to a status)
  UNAUTHORIZED: "UNAUTHORIZED",
  /** The principal's workspace roles do not grant this action (a viewer starting a run). */
  ROLE_NOT_ALLOWED: "ROLE_NOT_ALLOWED",
  NOT_FOUND: "NOT_FOUND",
  INVALID_JSON: "INVALID_JSON",
  INVALID_BODY: "INVALID_BODY",
  INVALID_QUERY: "INVALID_QUERY",
  UNSUPPORTED_MEDIA_TYPE: "UNSUPPORTED_MEDIA_TYPE",
  PAYLOAD_TOO_LARGE: "PAYLOAD_TOO_LARGE",
  /** Too many API requests for this key (not a step's provider limit: that is RATE_LIMITED). */
  TOO_MANY_REQUESTS: "TOO_MANY_REQUESTS",
  /** No plan could be written for a request (the fallback planner names what it understood). */
  PLANNING_FAILED: "PLANNING_FAILED",
  /** More open event streams with this key than the server allows (`TOOLCHAIN_MAX_STREAMS_PER_KEY`). */
  TOO_MANY_STREAMS: "TOO_MANY_STREAMS",
  NOT_READY: "NOT_READY",
  /** A path parameter that is not a valid percent-encoding (or holds characters no id can have). */
  INVALID_PATH: "INVALID_PATH",
  /** A workspace quota is reached (tables, records); details name the quota and its limit. */
  QUOTA_EXCEEDED: "QUOTA_EXCEEDED",
  // table store (skills/qtable)
  TABLE_NOT_FOUND: "TABLE_NOT_FOUND",
  TABLE_NAME_TAKEN: "TABLE_NAME_TAKEN",
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];
export const ERROR_CODES = Object.values(ErrorCode) as [ErrorCode, ...ErrorCode[]];

/** Codes a step may be retried on by default: transient by nature. */
export const DEFAULT_RETRYABLE: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  ErrorCode.EXECUTION_FAILED,
  ErrorCode.TRANSIENT,
  ErrorCode.TIMEOUT,
  ErrorCode.RATE_LIMITED,
]);

export interface ToolchainErrorOptions {
  details?: unknown;
  /** Only meaningful for step errors: did the skill possibly start its side effect? */
  effectStarted?: boolean;
  /** RATE_LIMITED: the provider asked us to wait this long before retrying. */
  retryAfterMs?: number;
  cause?: unknown;
}

export class ToolchainError extends Error {
  override readonly name = "ToolchainError";
  readonly code: ErrorCode;
  readonly details?: unknown;
  readonly effectStarted?: boolean;
  readonly retryAfterMs?: number;
  constructor(code: ErrorCode, message: string, opts: ToolchainErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.code = code;
    this.details = opts.details;
    this.effectStarted = opts.effectStarted;
    this.retryAfterMs = opts.retryAfterMs;
  }
  get retryable(): boolean {
    return DEFAULT_RETRYABLE.has(this.code);
  }
}

/** Plain, serializable error as stored in run state, events and the database. */
export interface StepError {
  code: ErrorCode;
  message: string;
  details?: unknown;
  effectStarted?: boolean;
  retryAfterMs?: number;
}

export function isErrorCode(x: unknown): x is ErrorCode {
  return typeof x === "string" && (ERROR_CODES as string[]).includes(x);
}

/** Anything thrown by a skill becomes a StepError; unknown throws are EXECUTION_FAILED. */
export function toStepError(e: unknown): StepError {
  if (e && typeof e === "object" && isErrorCode((e as { code?: unknown }).code)) {
    const te = e as ToolchainError;
    const out: StepError = { code: te.code, message: storableText(String(te.message)) };
    if (te.details !== undefined) {
      // an error is stored with the run: text and details must be storable (json-safety.ts)
      const bad = findUnstorable(te.details, "details");
      out.details = bad ? { unstorable: bad.message } : te.details;
    }
    if (te.effectStarted !== undefined) out.effectStarted = te.effectStarted;
    if (te.retryAfterMs !== undefined) out.retryAfterMs = te.retryAfterMs;
    return out;
  }
  const message = e instanceof Error ? e.message : String(e);
  return { code: ErrorCode.EXECUTION_FAILED, message: storableText(message) };
}

/**
 * The error a cancelled run ends with: the reason, and who asked for it (`details.by`, `.via`),
 * so the run's final event and view name the principal as its `run_cancel_requested` event does.
 */
export function cancelError(reason: string | undefined, who?: { by?: Actor; via?: Via }): ToolchainError {
  const details = who?.by ? { by: who.by, ...(who.via ? { via: who.via } : {}) } : undefined;
  return new ToolchainError(ErrorCode.CANCELLED, reason || "cancelled by request", details ? { details } : {});
}
