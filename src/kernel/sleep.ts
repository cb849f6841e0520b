/**
 * A timer that an AbortSignal cancels: backoffs (steps, compensations, the planner's model
 * retries) and core.wait share it. Rejects with the signal's reason.
 */
import { ErrorCode, ToolchainError } from "./errors.js";

export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(abortReason(signal!));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new ToolchainError(ErrorCode.CANCELLED, "aborted");
}
