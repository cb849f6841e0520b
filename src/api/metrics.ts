/**
 * Prometheus metrics (prom-client), one registry per app. Step durations, retries and
 * confirmation waits are observed from the events this process appends (the store's change
 * watcher): in a cluster, each process reports the work it executed and Prometheus sums them.
 * Runs by status and the queue depth are read from the run store at scrape time.
 */
import { LRUCache } from "lru-cache";
import client from "prom-client";
import type { RunEvent } from "../kernel/events.js";
import { RUN_STATUSES } from "./schemas.js";
import type { RunStore } from "../store/run-store.js";
import { onRuntimeSignal } from "../telemetry/signals.js";

export interface ApiMetrics {
  registry: client.Registry;
  httpDuration: client.Histogram<"method" | "route" | "status">;
  sseClients: client.Gauge;
  /** Incremented by whatever applies an approval's expiry. */
  approvalsExpired: client.Counter<"outcome">;
  /** Runs with per-step timing state held (bounded). */
  tracked(): { running: number; waiting: number };
  close(): void;
}

/** Age buckets of waiting confirmations (upper bounds in ms). */
export const WAIT_AGES = [
  { label: "lt_1m", maxMs: 60_000 },
  { label: "1m_15m", maxMs: 900_000 },
  { label: "15m_1h", maxMs: 3_600_000 },
  { label: "1h_1d", maxMs: 86_400_000 },
  { label: "gt_1d", maxMs: Infinity },
] as const;

export const waitAge = (ms: number): string => WAIT_AGES.find((a) => ms < a.maxMs)!.label;

export function createMetrics(
  store: RunStore,
  opts: { defaultMetrics?: boolean; openStreams?: () => number; maxTrackedRuns?: number } = {},
): ApiMetrics {
  const registry = new client.Registry();
  if (opts.defaultMetrics ?? true) client.collectDefaultMetrics({ register: registry });

  let counted: Promise<Partial<Record<string, number>>> | undefined;
  let countedAt = 0;
  // one query per scrape even though two gauges read it
  const counts = () => {
    if (!counted || Date.now() - countedAt > 1_000) {
      countedAt = Date.now();
      counted = store.countRuns().catch(() => ({}));
    }
    return counted;
  };
  new client.Gauge({
    name: "toolchain_runs",
    help: "Runs by status (all workspaces)",
    labelNames: ["status"],
    registers: [registry],
    async collect() {
      const c = await counts();
      for (const s of RUN_STATUSES) this.set({ status: s }, c[s] ?? 0);
    },
  });
  new client.Gauge({
    name: "toolchain_queue_depth",
    help: "Runs recorded and waiting for an executor (status queued)",
    registers: [registry],
    async collect() {
      this.set((await counts()).queued ?? 0);
    },
  });
  const stepDuration = new client.Histogram({
    name: "toolchain_step_duration_seconds",
    help: "Step attempt durations executed by this process, by skill and outcome",
    labelNames: ["skill", "outcome"],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
    registers: [registry],
  });
  const retries = new client.Counter({
    name: "toolchain_step_retries_total",
    help: "Step retries scheduled by this process",
    labelNames: ["skill"],
    registers: [registry],
  });
  const confirmWait = new client.Histogram({
    name: "toolchain_confirmation_wait_seconds",
    help: "Time a step waited for a human decision (observed where the decision was applied)",
    buckets: [1, 5, 15, 60, 300, 900, 3_600, 14_400, 86_400],
    registers: [registry],
  });
  const finished = new client.Counter({
    name: "toolchain_runs_finished_total",
    help: "Runs this process drove to a final state",
    labelNames: ["status"],
    registers: [registry],
  });
  const httpDuration = new client.Histogram({
    name: "toolchain_http_request_duration_seconds",
    help: "API request durations (SSE streams excluded)",
    labelNames: ["method", "route", "status"],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30],
    registers: [registry],
  });
  const sseClients = new client.Gauge({
    name: "toolchain_sse_clients",
    help: "Open event streams",
    registers: [registry],
    collect() {
      if (opts.openStreams) this.set(opts.openStreams());
    },
  });

  const compensationFailures = new client.Counter({
    name: "toolchain_compensation_failures_total",
    help: "Compensations that failed for good in runs this process drove (step_rollback_failed)",
    registers: [registry],
  });
  const approvalsExpired = new client.Counter({
    name: "toolchain_approvals_expired_total",
    help: "Confirmations that expired before anyone decided (counted where the expiry is applied; outcome: rejected, left)",
    labelNames: ["outcome"],
    registers: [registry],
  });
  const driveFailures = new client.Counter({
    name: "toolchain_drive_failures_total",
    help: "Drives of a run that threw in this process (final: the run failed with DRIVE_FAILED)",
    labelNames: ["final"],
    registers: [registry],
  });
  const leaseLosses = new client.Counter({
    name: "toolchain_lease_losses_total",
    help: "Runs whose lease this process lost while executing them (another process took over)",
    registers: [registry],
  });
  const unsignal = onRuntimeSignal((sig) => {
    if (sig.kind === "drive_failed") driveFailures.inc({ final: String(sig.final) });
    else if (sig.kind === "lease_lost") leaseLosses.inc();
  });
  new client.Gauge({
    name: "toolchain_confirmations_waiting",
    help: "Steps waiting for a human decision that this process saw start, by how long they have waited",
    labelNames: ["age"],
    registers: [registry],
    collect() {
      const counts = Object.fromEntries(WAIT_AGES.map((a) => [a.label, 0]));
      const now = Date.now();
      for (const [, steps] of waiting.entries()) for (const since of steps.values()) counts[waitAge(now - since)]!++;
      for (const a of WAIT_AGES) this.set({ age: a.label }, counts[a.label]!);
    },
  });

  // per run: step -> { started ms, skill }; waiting step -> since ms
  // Bounded (least recently touched runs dropped): runs that end elsewhere, lose their lease or
  // wait for days would otherwise stay here forever. A dropped wait is found in the event log.
  const running = new LRUCache<string, Map<string, { t: number; skill: string }>>({
    max: opts.maxTrackedRuns ?? 10_000,
  });
  const waiting = new LRUCache<string, Map<string, number>>({ max: opts.maxTrackedRuns ?? 10_000 });
  const per = <V extends {}>(m: LRUCache<string, Map<string, V>>, runId: string) => {
    let x = m.get(runId);
    if (!x) m.set(runId, (x = new Map()));
    return x;
  };
  const observe = (e: RunEvent) => {
    const at = Date.parse(e.at);
    const step = e.stepId ?? "";
    switch (e.type) {
      case "step_started":
        per(running, e.runId).set(step, { t: at, skill: String(e.data.skillName ?? "unknown") });
        break;
      case "step_completed":
      case "step_failed":
      case "step_retrying": {
        const r = running.get(e.runId)?.get(step);
        if (r) {
          stepDuration.observe(
            { skill: r.skill, outcome: e.type === "step_completed" ? "completed" : "failed" },
            Math.max(0, at - r.t) / 1000,
          );
          running.get(e.runId)!.delete(step);
          if (!running.get(e.runId)!.size) running.delete(e.runId);
        }
        if (e.type === "step_retrying") retries.inc({ skill: r?.skill ?? "unknown" });
        break;
      }
      case "step_waiting_confirmation":
        per(waiting, e.runId).set(step, at);
        break;
      case "step_confirmed": {
        const since = waiting.get(e.runId)?.get(step);
        if (since !== undefined) {
          confirmWait.observe(Math.max(0, at - since) / 1000);
          waiting.get(e.runId)!.delete(step);
          if (!waiting.get(e.runId)!.size) waiting.delete(e.runId);
        } else void waitedSince(e).then((t) => t !== undefined && confirmWait.observe(Math.max(0, at - t) / 1000));
        break;
      }
      case "step_rollback_failed":
        compensationFailures.inc();
        break;
      case "approval_expired":
        approvalsExpired.inc({ outcome: String(e.data.outcome ?? "rejected") });
        break;
      case "run_completed":
      case "run_failed":
        finished.inc({ status: String(e.data.status ?? (e.type === "run_completed" ? "completed" : "failed")) });
        running.delete(e.runId);
        waiting.delete(e.runId);
        break;
      case "run_waiting_confirmation":
        running.delete(e.runId);
        break;
    }
  };
  // the wait began in another process (or before this one started): find it in the event log
  const waitedSince = async (e: RunEvent): Promise<number | undefined> => {
    const events = await store.list(e.runId).catch(() => []);
    const w = events
      .filter((x) => x.type === "step_waiting_confirmation" && x.stepId === e.stepId && x.seq < e.seq)
      .at(-1);
    return w ? Date.parse(w.at) : undefined;
  };
  const unwatch = store.onChange(({ events }) => {
    for (const e of events) observe(e);
  });

  return {
    registry,
    httpDuration,
    sseClients,
    tracked: () => ({ running: running.size, waiting: waiting.size }),
    approvalsExpired,
    close: () => {
      unwatch();
      unsignal();
    },
  };
}
