/**
 * The worker loop: every `pollMs`, take over runs that need an executor (queued, or whose owner
 * stopped heartbeating) while there is room, apply approval deadlines that passed, and prune old
 * checkpoints when asked. A failing
 * round is logged (rate-limited: the same message once a minute), never thrown: the next round
 * tries again, so a database that restarts is ridden out.
 */
import { logger } from "../telemetry/log.js";

export interface WorkerOptions {
  /** @default 1000 */
  pollMs?: number;
  /** Runs executing in this process at most. @default 50 */
  maxActive?: number;
  /** Prune checkpoints of runs finished longer ago than this (checked once a minute). */
  retainCheckpointsMs?: number;
  /** Where a failed round is reported. @default the process logger (src/telemetry/log.ts), level warn */
  log?: (line: string) => void;
}

export interface WorkerDeps {
  /** Free room given the cap. */
  room(maxActive: number): number;
  recover(limit: number): Promise<unknown>;
  /** Apply approval deadlines that passed (durable timers: any process's loop applies them). */
  expire(): Promise<unknown>;
  prune(olderThanMs: number): Promise<unknown>;
  now(): number;
}

const REPEAT_MS = 60_000;

export function startWorkerLoop(deps: WorkerDeps, opts: WorkerOptions = {}): () => Promise<void> {
  const pollMs = opts.pollMs ?? 1_000;
  const maxActive = opts.maxActive ?? 50;
  const log = opts.log ?? ((line: string) => logger().warn(line));
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let lastPrune = 0;
  const said = new Map<string, number>();
  const report = (what: string) => (e: unknown) => {
    const line = `toolchain worker: ${what} failed: ${e instanceof Error ? e.message : String(e)}`;
    const at = deps.now();
    if (at - (said.get(line) ?? -Infinity) < REPEAT_MS) return;
    if (said.size > 100) said.clear();
    said.set(line, at);
    log(line);
  };
  const tick = async () => {
    if (stopped) return;
    const room = deps.room(maxActive);
    if (room > 0) await deps.recover(room).catch(report("taking over runs"));
    if (!stopped) await deps.expire().catch(report("expiring approvals"));
    if (opts.retainCheckpointsMs !== undefined && deps.now() - lastPrune > 60_000) {
      lastPrune = deps.now();
      await deps.prune(opts.retainCheckpointsMs).catch(report("pruning checkpoints"));
    }
    if (!stopped) timer = setTimeout(tick, pollMs);
  };
  void tick();
  return async () => {
    stopped = true;
    clearTimeout(timer);
  };
}
