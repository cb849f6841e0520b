/**
 * The boundary and step-result side of src/kernel/json-safety.ts: refusing input the run history
 * cannot store (UNSUPPORTED_VALUE, 400 at the API, naming the field), failing a step whose
 * output or preview cannot be stored, and making error text storable. Storable also means within
 * the value budget (src/kernel/value-budget.ts): a larger value is VALUE_TOO_LARGE.
 */
import { ErrorCode, ToolchainError, type StepError } from "./errors.js";
import { findUnstorable, storableText } from "./json-safety.js";
import { jsonBytes, maxValueBytes, valueTooLarge } from "./value-budget.js";

export { findUnstorable, storableText, MAX_VALUE_DEPTH, type Unstorable } from "./json-safety.js";

/** Throw UNSUPPORTED_VALUE (400 at the API) naming the field when `value` cannot be stored. */
export function assertStorable(value: unknown, field: string, maxBytes = maxValueBytes()): void {
  const u = findUnstorable(value, field);
  if (u)
    throw new ToolchainError(ErrorCode.UNSUPPORTED_VALUE, u.message, { details: { field: u.path, reason: u.reason } });
  if (jsonBytes(value, maxBytes) > maxBytes) throw valueTooLarge(field, maxBytes);
}

/**
 * A step failure for a skill result (output, preview) that cannot be stored, or is larger than
 * the value budget (`maxBytes`, default TOOLCHAIN_MAX_VALUE_BYTES). Deterministic: never retried.
 */
export function unstorableResult(
  value: unknown,
  field: string,
  skillName: string,
  maxBytes = maxValueBytes(),
): StepError | undefined {
  const u = findUnstorable(value, field);
  if (u)
    return {
      code: ErrorCode.UNSUPPORTED_VALUE,
      message: `${skillName} returned a value the run history cannot store: ${u.message}`,
      details: { field: u.path, reason: u.reason },
      effectStarted: true,
    };
  if (jsonBytes(value, maxBytes) <= maxBytes) return undefined;
  const e = valueTooLarge(field, maxBytes, { what: `the ${field} ${skillName} returned is` });
  return { code: e.code, message: e.message, details: e.details, effectStarted: true };
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
