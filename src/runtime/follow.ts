/**
 * Following a run executed elsewhere (or already settled) through the store: poll its row until
 * it is terminal or waits for a decision with no live lease, then answer with its view, or, when
 * a recorded decision or cancel has nobody applying it, resume it here (library use without
 * workers), so a caller never waits for a drive that will not come.
 */
import { Channel } from "../kernel/channel.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import type { RunEvent } from "../kernel/events.js";
import { TERMINAL_RUN, type RunStatus } from "../kernel/status.js";
import type { RunRow, RunStore } from "../store/run-store.js";
import type { RunHandle } from "./options.js";
import type { RunView } from "../kernel/run-view.js";

const SETTLED: ReadonlySet<RunStatus> = new Set<RunStatus>([...TERMINAL_RUN, "waiting_confirmation"]);
const POLL_MS = 50;

export interface FollowDeps {
  store: Pick<RunStore, "getRow">;
  now(): number;
  /** A drive of the run started in this process meanwhile. */
  executingHere(): boolean;
  hasRequestToApply(row: RunRow): Promise<boolean>;
  view(): Promise<RunView>;
  resume(): Promise<RunView>;
}

export function followStored(runId: string, released: AbortController, deps: FollowDeps): RunHandle {
  const events = new Channel<RunEvent>();
  events.close();
  const result = (async () => {
    while (!released.signal.aborted) {
      const row = await deps.store.getRow(runId);
      if (!row) throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
      // a lease past its expiry belongs to a dead process (it may have died right after its final sync)
      const leased =
        row.leaseOwner !== null && (row.leaseExpiresAt === null || row.leaseExpiresAt.getTime() > deps.now());
      if (SETTLED.has(row.status) && !leased && !deps.executingHere()) {
        return (await deps.hasRequestToApply(row)) ? deps.resume() : deps.view();
      }
      await pause(POLL_MS, released.signal);
    }
    throw new ToolchainError(ErrorCode.INTERNAL, `stopped following run ${runId}`);
  })();
  result.catch(() => undefined);
  return { runId, events, result, release: () => released.abort() };
}

/** `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((r) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      r();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
