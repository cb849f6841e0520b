/**
 * The one way tests wait for a condition: poll `predicate` until it holds, with a deadline and a
 * message that says what never happened (so a stuck test fails with a reason, not a timeout).
 */
export interface WaitOptions {
  /** Give up after this long (default 10 s). */
  timeoutMs?: number;
  /** What is awaited, for the failure message ("run r1 completed"). */
  what?: string;
  /** Poll interval (default 10 ms). */
  intervalMs?: number;
  /** Treat a predicate that throws as "not yet" (e.g. a database that is restarting); default: rethrow at once. */
  retryErrors?: boolean;
}

/**
 * Resolves with the predicate's first truthy value. A predicate that throws fails the wait at
 * once, unless `retryErrors` (then the last error is part of the timeout message).
 */
export async function waitFor<T>(predicate: () => T | Promise<T>, opts: WaitOptions = {}): Promise<NonNullable<T>> {
  const { timeoutMs = 10_000, what = "condition", intervalMs = 10, retryErrors = false } = opts;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await predicate();
      if (v) return v as NonNullable<T>;
      lastError = undefined;
    } catch (e) {
      if (!retryErrors) throw e;
      lastError = e;
    }
    if (Date.now() >= deadline) {
      const why = lastError ? ` (last error: ${(lastError as Error)?.message ?? String(lastError)})` : "";
      throw new Error(`waitFor: ${what} not reached within ${timeoutMs} ms${why}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
