/**
 * Random layered DAGs for the scheduling suite, and the bounds we compare makespans against.
 *
 * Shape: steps are laid out in declaration order over ~sqrt(n) layers of random width; a step in
 * layer L > 0 depends on 0–3 distinct earlier steps (each picked from layer L-1 with probability
 * 0.6, else uniformly among all earlier layers), so the mix has long chains, wide layers, joins
 * and late roots. Durations are uniform integers in [minMs, maxMs].
 */
import { mulberry32, randInt } from "./prng.js";

export interface DagStep {
  id: string;
  ms: number;
  /** indices of earlier steps */
  deps: number[];
}

export interface Dag {
  steps: DagStep[];
  /** longest path, sum of ms */
  criticalPathMs: number;
  totalWorkMs: number;
  /** longest remaining path from each step (inclusive): the usual list-scheduling priority */
  rank: number[];
  layers: number;
}

export interface DagOptions {
  minMs?: number;
  maxMs?: number;
  maxDeps?: number;
}

export function randomDag(n: number, seed: number, opts: DagOptions = {}): Dag {
  const { minMs = 5, maxMs = 100, maxDeps = 3 } = opts;
  const rng = mulberry32(seed);
  const avgWidth = Math.max(1, Math.round(Math.sqrt(n)));
  const layerOf: number[] = [];
  const layerStart: number[] = [];
  let layer = 0;
  while (layerOf.length < n) {
    layerStart.push(layerOf.length);
    const width = randInt(rng, 1, 2 * avgWidth - 1);
    for (let k = 0; k < width && layerOf.length < n; k++) layerOf.push(layer);
    layer++;
  }
  const steps: DagStep[] = [];
  for (let i = 0; i < n; i++) {
    const L = layerOf[i]!;
    const deps = new Set<number>();
    if (L > 0) {
      const k = randInt(rng, 0, maxDeps);
      const prevStart = layerStart[L - 1]!;
      const prevEnd = layerStart[L]!; // exclusive
      for (let j = 0; j < k; j++) {
        const d = rng() < 0.6 ? randInt(rng, prevStart, prevEnd - 1) : randInt(rng, 0, prevEnd - 1);
        deps.add(d);
      }
    }
    steps.push({ id: `s${i}`, ms: randInt(rng, minMs, maxMs), deps: [...deps].sort((a, b) => a - b) });
  }
  return { steps, ...analyse(steps), layers: layer };
}

/**
 * Random NON-layered DAG: step i depends on 0–`maxDeps` distinct steps among the `window` before
 * it (uniformly), so ready steps appear one by one as their own dependencies end, not in waves.
 * Layered DAGs let a superstep engine (Send) look better than it is: a whole layer tends to
 * become ready together. Durations are uniform integers in [minMs, maxMs].
 */
export function randomWindowDag(n: number, seed: number, opts: DagOptions & { window?: number } = {}): Dag {
  const { minMs = 5, maxMs = 50, maxDeps = 3, window = 10 } = opts;
  const rng = mulberry32(seed);
  const steps: DagStep[] = [];
  for (let i = 0; i < n; i++) {
    const deps = new Set<number>();
    const lo = Math.max(0, i - window);
    if (i > 0) {
      const k = randInt(rng, 0, maxDeps);
      for (let j = 0; j < k; j++) deps.add(randInt(rng, lo, i - 1));
    }
    steps.push({ id: `s${i}`, ms: randInt(rng, minMs, maxMs), deps: [...deps].sort((a, b) => a - b) });
  }
  // "layers" here: the longest chain of steps (in step count), for the log line
  const depth: number[] = [];
  for (const s of steps) depth.push(1 + Math.max(0, ...s.deps.map((d) => depth[d]!)));
  return { steps, ...analyse(steps), layers: Math.max(...depth) };
}

function analyse(steps: readonly DagStep[]): { criticalPathMs: number; totalWorkMs: number; rank: number[] } {
  const finish: number[] = [];
  let cp = 0;
  let work = 0;
  for (const s of steps) {
    let start = 0;
    for (const d of s.deps) start = Math.max(start, finish[d]!);
    finish.push(start + s.ms);
    cp = Math.max(cp, start + s.ms);
    work += s.ms;
  }
  const succ: number[][] = steps.map(() => []);
  steps.forEach((s, i) => s.deps.forEach((d) => succ[d]!.push(i)));
  const rank = new Array<number>(steps.length).fill(0);
  for (let i = steps.length - 1; i >= 0; i--) {
    let best = 0;
    for (const j of succ[i]!) best = Math.max(best, rank[j]!);
    rank[i] = steps[i]!.ms + best;
  }
  return { criticalPathMs: cp, totalWorkMs: work, rank };
}

/** max(critical path, total work / concurrency); the critical path alone when unlimited. */
export function lowerBoundMs(dag: Dag, maxConcurrency: number | undefined): number {
  if (maxConcurrency === undefined) return dag.criticalPathMs;
  return Math.max(dag.criticalPathMs, dag.totalWorkMs / maxConcurrency);
}

/** The DAG as a runtime plan of core.wait steps. */
export function toPlan(dag: Dag, maxConcurrency: number | undefined) {
  return {
    steps: dag.steps.map((s) => ({
      stepId: s.id,
      skillName: "core.wait",
      dependsOn: s.deps.map((d) => dag.steps[d]!.id),
      arguments: { ms: s.ms },
    })),
    ...(maxConcurrency === undefined ? {} : { maxConcurrency }),
  };
}
