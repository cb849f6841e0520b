/**
 * The boundary and step-result side of src/kernel/json-safety.ts: refusing input the run history
 * cannot store (UNSUPPORTED_VALUE, 400 at the API, naming the field), failing a step whose
 * output or preview cannot be stored, and making error text storable.
 */
import { ErrorCode, ToolchainError, type StepError } from "./errors.js";
import { findUnstorable, storableText } from "./json-safety.js";

export { findUnstorable, storableText, MAX_VALUE_DEPTH, type Unstorable } from "./json-safety.js";

/** Throw UNSUPPORTED_VALUE (400 at the API) naming the field when `value` cannot be stored. */
export function assertStorable(value: unknown, field: string): void {
  const u = findUnstorable(value, field);
  if (u) throw new ToolchainError(ErrorCode.UNSUPPORTED_VALUE, u.message, { details: { field: u.path, reason: u.reason } });
}

/** A step failure for a skill result that cannot be stored (deterministic: never retried). */
export function unstorableResult(value: unknown, field: string, skillName: string): StepError | undefined {
  const u = findUnstorable(value, field);
  if (!u) return undefined;
  return { code: ErrorCode.UNSUPPORTED_VALUE, message: `${skillName} returned a value the run history cannot store: ${u.message}`, details: { field: u.path, reason: u.reason }, effectStarted: true };
}

/**
 * A step error whose text and details can be stored. The code and the retry hints are kept; an
 * unstorable `details` is replaced by a note (the message says what it was).
 */
export function storableError<E extends StepError>(e: E): E {
  const message = storableText(e.message);
  const badDetails = e.details !== undefined ? findUnstorable(e.details, "details") : undefined;
  if (message === e.message && !badDetails) return e;
  const out = { ...e, message };
  if (badDetails) out.details = { unstorable: badDetails.message };
  return out;
}
