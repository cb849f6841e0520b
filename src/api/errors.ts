/**
 * Errors → HTTP. Every ErrorCode has a status here (the Record makes the compiler insist when a
 * code is added); the body is always `{ "error": { "code", "message", "details"? } }`. Only a
 * bug answers 500: bad input of any kind has a stable 4xx code.
 */
import type { ErrorRequestHandler, RequestHandler, Response } from "express";
import type { z } from "zod";
import { ErrorCode, ToolchainError, isErrorCode } from "../kernel/errors.js";
import { isUndecodablePath, undecodableParam } from "./path-params.js";

export const HTTP_STATUS: Record<ErrorCode, number> = {
  // plan validation: the plan is wrong
  PLAN_INVALID: 400,
  PLAN_TOO_LARGE: 400,
  UNKNOWN_SKILL: 400,
  UNKNOWN_DEPENDENCY: 400,
  DUPLICATE_STEP_ID: 400,
  DUPLICATE_RESULT_KEY: 400,
  SELF_DEPENDENCY: 400,
  PLAN_CYCLE: 400,
  INVALID_REFERENCE: 400,
  UNKNOWN_OUTPUT_FIELD: 400,
  INVALID_ARGUMENTS: 400,
  SKILL_NOT_ALLOWED: 400,
  NOT_COMPENSABLE: 400,
  CONFIRMATION_REQUIRED: 400,
  PLAN_OVER_BUDGET: 400,
  RESERVED_ID: 400,
  UNSUPPORTED_VALUE: 400,
  VALUE_TOO_LARGE: 400,
  // step codes describe steps inside a run view; thrown at the API they would be a bug
  INVALID_INPUT: 500,
  INVALID_OUTPUT: 500,
  EXECUTION_FAILED: 500,
  TRANSIENT: 500,
  TIMEOUT: 500,
  RATE_LIMITED: 500,
  DEADLINE_EXCEEDED: 500,
  CANCELLED: 500,
  REJECTED: 500,
  EFFECT_UNKNOWN: 500,
  // runtime
  RUN_NOT_FOUND: 404,
  CONFIRMATION_NOT_PENDING: 409,
  NOT_ALLOWED_TO_DECIDE: 403,
  REQUESTER_CANNOT_APPROVE: 409,
  INVALID_DECISION: 400,
  RUN_NOT_ACTIVE: 409,
  RUN_NOT_REDRIVABLE: 409,
  RUN_BEING_DRIVEN: 409,
  REDRIVE_COMPENSATED: 409,
  INVALID_REDRIVE: 400,
  SKILL_VERSION_UNAVAILABLE: 500,
  MIGRATION_UNAVAILABLE: 409,
  DRIVE_FAILED: 500,
  INTERNAL: 500,
  // HTTP
  UNAUTHORIZED: 401,
  ROLE_NOT_ALLOWED: 403,
  NOT_FOUND: 404,
  INVALID_JSON: 400,
  INVALID_BODY: 400,
  INVALID_QUERY: 400,
  UNSUPPORTED_MEDIA_TYPE: 415,
  PAYLOAD_TOO_LARGE: 413,
  TOO_MANY_REQUESTS: 429,
  PLANNING_FAILED: 422,
  TOO_MANY_STREAMS: 429,
  NOT_READY: 503,
  INVALID_PATH: 400,
  // the workspace's state (its size), not the request, stands in the way: 409 like a name taken
  QUOTA_EXCEEDED: 409,
  // table store: another workspace's table is a missing one
  TABLE_NOT_FOUND: 404,
  TABLE_NAME_TAKEN: 409,
};

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: unknown };
}

/** body-parser's error types → our codes. */
const BODY_ERRORS: Record<string, ErrorCode> = {
  "entity.parse.failed": ErrorCode.INVALID_JSON,
  "entity.too.large": ErrorCode.PAYLOAD_TOO_LARGE,
  "encoding.unsupported": ErrorCode.UNSUPPORTED_MEDIA_TYPE,
  "charset.unsupported": ErrorCode.UNSUPPORTED_MEDIA_TYPE,
  "request.size.invalid": ErrorCode.INVALID_BODY,
  "request.aborted": ErrorCode.INVALID_BODY,
  "stream.encoding.set": ErrorCode.INTERNAL,
};

export function toErrorBody(e: unknown): { status: number; body: ErrorBody } {
  const bodyType = (e as { type?: unknown })?.type;
  if (typeof bodyType === "string" && bodyType in BODY_ERRORS) {
    const code = BODY_ERRORS[bodyType]!;
    const message =
      code === ErrorCode.INVALID_JSON
        ? `request body is not valid JSON: ${(e as Error).message}`
        : code === ErrorCode.PAYLOAD_TOO_LARGE
          ? `request body is larger than the limit of ${(e as { limit?: number }).limit} bytes`
          : (e as Error).message;
    return { status: HTTP_STATUS[code], body: { error: { code, message } } };
  }
  const code = (e as { code?: unknown })?.code;
  if (isErrorCode(code)) {
    const te = e as ToolchainError;
    const body: ErrorBody = { error: { code, message: String(te.message) } };
    if (te.details !== undefined) body.error.details = te.details;
    return { status: HTTP_STATUS[code], body };
  }
  return { status: 500, body: { error: { code: ErrorCode.INTERNAL, message: "internal error" } } };
}

export function sendError(res: Response, e: unknown): void {
  const { status, body } = toErrorBody(e);
  if (status === 401) res.setHeader("WWW-Authenticate", 'Bearer realm="toolchain"');
  res.status(status).json(body);
}

/** Where an internal error happened: enough to find it, nothing from the request's values. */
export interface InternalErrorInfo {
  method: string;
  route: string;
  runId?: string;
  /** A Postgres error: its SQLSTATE, routine and the schema objects it names (never its message or detail, which quote values). */
  postgres?: { code: string; routine?: string; table?: string; column?: string; constraint?: string };
}

function isPostgresError(
  e: unknown,
): e is { code: string; routine?: string; table?: string; column?: string; constraint?: string; severity?: string } {
  const x = e as { code?: unknown; severity?: unknown } | null;
  return typeof x?.code === "string" && /^[0-9A-Z]{5}$/.test(x.code) && typeof x.severity === "string";
}

/** The log line for an error that answered 500: a Postgres error by code and run id, else the error itself. */
export function describeInternalError(e: unknown, info: InternalErrorInfo): string {
  if (info.postgres) return `internal error: postgres ${JSON.stringify(info)}`;
  return `internal error ${JSON.stringify(info)}: ${(e as Error)?.stack ?? String(e)}`;
}

/** The last middleware. `onInternal` sees the errors that answer 500 (bugs: log them). */
export function errorHandler(onInternal: (e: unknown, info: InternalErrorInfo) => void): ErrorRequestHandler {
  return (err, req, res, next) => {
    if (res.headersSent) return next(err);
    if (isUndecodablePath(err)) {
      const name = undecodableParam(req);
      err = new ToolchainError(
        ErrorCode.INVALID_PATH,
        `${name ? `path parameter ${name}` : "the path"}: not valid percent-encoding (a % must start an escape of UTF-8 bytes)`,
        { details: name ? { parameter: name } : undefined },
      );
    }
    const { status } = toErrorBody(err);
    if (status === 500) {
      const info: InternalErrorInfo = {
        method: req.method,
        route: (req.route?.path as string | undefined) ?? req.path.slice(0, 100),
      };
      const runId = (req.params as Record<string, string> | undefined)?.runId;
      if (runId) info.runId = runId.slice(0, 200);
      if (isPostgresError(err)) {
        info.route = (req.route?.path as string | undefined) ?? "unmatched";
        info.postgres = {
          code: err.code,
          ...(err.routine ? { routine: err.routine } : {}),
          ...(err.table ? { table: err.table } : {}),
          ...(err.column ? { column: err.column } : {}),
          ...(err.constraint ? { constraint: err.constraint } : {}),
        };
      }
      onInternal(err, info);
    }
    sendError(res, err);
  };
}

export const notFound: RequestHandler = (req, _res, next) => {
  next(new ToolchainError(ErrorCode.NOT_FOUND, `no route for ${req.method} ${req.path}`));
};

/** Parse with a schema or throw `code` naming the first bad field; every issue is in details.issues. */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown, code: ErrorCode, where: string): z.output<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issues = r.error.issues.map((i) => ({ path: [where, ...i.path.map(String)].join("."), message: i.message }));
  const first = issues[0]!;
  const more = issues.length > 1 ? ` (and ${issues.length - 1} more)` : "";
  throw new ToolchainError(code, `${first.path}: ${first.message}${more}`, { details: { issues } });
}
