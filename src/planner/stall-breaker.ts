/**
 * A stall is paid once. When a model endpoint lets a call run into its deadline, the next model
 * call on the same request (the split skill asking the same endpoint seconds later, after the
 * fallback planner wrote the plan) would wait a second full timeout for the same silence. The
 * breaker remembers, per endpoint and model, that it stalled; the split skill skips the model
 * while it is open, and any answer closes it. Process-wide on purpose: the planner and the split
 * skill are built separately but talk to the same endpoint.
 */

/** How long a stall keeps the breaker open. */
export const STALL_COOLDOWN_MS = 60_000;

const stalledUntil = new Map<string, number>();

export const endpointKey = (c: { baseURL?: string; model: string }): string =>
  `${c.baseURL ?? "https://api.openai.com/v1"}|${c.model}`;

export const stallBreaker = {
  /** The endpoint let a call run into its deadline. */
  trip(key: string, now = Date.now(), cooldownMs = STALL_COOLDOWN_MS): void {
    stalledUntil.set(key, now + cooldownMs);
  },
  /** The endpoint answered (anything, even an error status): it is not stalling. */
  reset(key: string): void {
    stalledUntil.delete(key);
  },
  /** Since when it stalls, while the breaker is open. */
  isOpen(key: string, now = Date.now()): boolean {
    const until = stalledUntil.get(key);
    if (until === undefined) return false;
    if (until > now) return true;
    stalledUntil.delete(key);
    return false;
  },
};
