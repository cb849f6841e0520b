/** Timing helpers for the benchmarks. */
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import type { BaseCheckpointSaver } from "@langchain/langgraph";

export const now = (): number => performance.now();

export async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = now();
  const value = await fn();
  return { ms: now() - t0, value };
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Rounds for printing (keeps the JSON lines short). */
export function round(x: number, digits = 3): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Collect garbage between measurements when node runs with --expose-gc (no-op otherwise). */
export function maybeGc(): void {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) gc();
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export const log = (...args: unknown[]): void => {
  process.stderr.write(`[bench] ${args.map((a) => (typeof a === "string" ? a : JSON.stringify(a))).join(" ")}\n`);
};

/** One JSON object per line on stdout, with the 1-minute load average (other work on the box skews timings). */
export const emitLine = (obj: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify({ ...obj, load1: round(loadavg()[0]!, 2) })}\n`);
};

/** What is running now ("runtime", "send baseline", ...): warnings are attributed to it (bench/run.ts). */
export const phase = { current: "other" };
export async function inPhase<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const prev = phase.current;
  phase.current = name;
  try {
    return await fn();
  } finally {
    phase.current = prev;
  }
}

/**
 * Supersteps a run's nodes took, from its thread's checkpoints: LangGraph saves the input's
 * (step -1), START's (step 0), then one per superstep, so it is the last checkpoint's step (a
 * one-node graph: 3 checkpoints, 1 superstep). Deterministic, unlike the timings.
 */
export async function superstepsOf(saver: BaseCheckpointSaver, threadId: string): Promise<number> {
  let step = -1;
  for await (const c of saver.list({ configurable: { thread_id: threadId } }))
    step = Math.max(step, c.metadata?.step ?? -1);
  return step;
}

/**
 * Whether this process was started on the bench file `name` (e.g. "durable"), as a script run by
 * tsx or as its bundle (.cache/dist/bench__durable.mjs). Not `import.meta.url === argv[1]`: in a
 * bundle every module shares the bundle's URL, so every suite's guard would fire.
 */
export const isMain = (name: string): boolean =>
  new RegExp(`bench(?:/|__)${name}\\.(?:ts|mjs)$`).test((process.argv[1] ?? "").replace(/\\/g, "/"));
