/** What is wrong with a plan: one issue per problem, each with a stable code; the error carries them all. */
import { ErrorCode, ToolchainError } from "../kernel/errors.js";

export interface PlanIssue {
  code: ErrorCode;
  message: string;
  stepId?: string;
  path?: string;
}

export class PlanValidationError extends ToolchainError {
  constructor(readonly issues: PlanIssue[]) {
    const first = issues[0]!;
    const more = issues.length > 1 ? ` (and ${issues.length - 1} more issue${issues.length > 2 ? "s" : ""})` : "";
    super(first.code, first.message + more, { details: { issues } });
  }
}

/**
 * Ids that name Object.prototype members (`constructor`, `toString`, `__proto__`, …). Step ids and
 * memory keys index plain objects all over the runtime, LangGraph's state and skills' code; such
 * an id would read an inherited member as its record, so it is refused (RESERVED_ID).
 */
export const RESERVED_IDS: ReadonlySet<string> = new Set(Object.getOwnPropertyNames(Object.prototype));
