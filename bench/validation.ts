/**
 * Validation suite (tenant safety): plans of 1,000 and 10,000 steps where every step references
 * others (`steps.s0`, its predecessor, the step halfway back), validated the way the API does it
 * (`compilePlanAsync`, in slices) and in one synchronous call (`compilePlan`, library use).
 * Prints the validation time per size (linear: the ratio per step stays flat) and the event
 * loop's delay while it ran (perf_hooks monitorEventLoopDelay: max and p99; the target is no
 * stretch over ~50 ms). Then the same for running a 1,000 / 10,000-step chain of no-op steps
 * (scheduling), so the scheduler's work is measured the same way.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { coreSkills } from "../skills/core/index.js";
import { createRuntime } from "../src/index.js";
import { compilePlan, compilePlanAsync } from "../src/plan/validate.js";
import { SkillRegistry } from "../src/skills/registry.js";
import { emitLine, log, maybeGc, median, now, round } from "./timing.js";

/** A chain in which every step references steps.s0, its predecessor and the step halfway back (brokenLast: the last one names a step that does not exist). */
export function referencingPlan(n: number, opts: { brokenLast?: boolean } = {}) {
  return {
    steps: Array.from({ length: n }, (_, i) => ({
      stepId: `s${i}`,
      skillName: "core.pass",
      dependsOn: i > 0 ? [`s${i - 1}`] : [],
      arguments: {
        // numbers only, so outputs do not nest each other (the plan is about references, not data)
        value:
          i === 0
            ? { n: 0 }
            : opts.brokenLast && i === n - 1
              ? { n: i, ghost: { $ref: `steps.s${n}.n` } }
              : {
                  n: i,
                  first: { $ref: "steps.s0.n" },
                  prev: { $ref: `steps.s${i - 1}.n` },
                  mid: { $ref: `steps.s${i >> 1}.n` },
                },
      },
    })),
  };
}

/** Runs `fn` while an event-loop-delay histogram records; ms figures. */
export async function withLoopDelay<T>(
  fn: () => Promise<T>,
): Promise<{ value: T; ms: number; maxDelayMs: number; p99DelayMs: number }> {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  const t0 = now();
  // a timer must be due for a stall to show up as delay
  const tick = setInterval(() => undefined, 5);
  try {
    const value = await fn();
    const ms = now() - t0;
    await new Promise((r) => setImmediate(r));
    return { value, ms, maxDelayMs: h.max / 1e6, p99DelayMs: h.percentile(99) / 1e6 };
  } finally {
    clearInterval(tick);
    h.disable();
  }
}

export async function validationSuite(o: { sizes: number[]; reps: number; runSizes: number[] }): Promise<void> {
  const registry = new SkillRegistry(coreSkills);
  for (const n of o.sizes) {
    const plan = referencingPlan(n);
    const bytes = JSON.stringify(plan).length;
    const sync: number[] = [];
    const sliced: { ms: number; maxDelayMs: number; p99DelayMs: number }[] = [];
    compilePlan(plan, { registry }); // warm-up
    for (let r = 0; r < o.reps; r++) {
      maybeGc();
      const t0 = now();
      compilePlan(plan, { registry });
      sync.push(now() - t0);
      maybeGc();
      sliced.push(await withLoopDelay(() => compilePlanAsync(plan, { registry })));
    }
    const line = {
      suite: "validation",
      steps: n,
      refs: 3 * (n - 1),
      planBytes: bytes,
      syncMs: round(median(sync), 1),
      slicedMs: round(median(sliced.map((s) => s.ms)), 1),
      usPerStep: round((median(sliced.map((s) => s.ms)) * 1000) / n, 1),
      loopDelayMaxMs: round(Math.max(...sliced.map((s) => s.maxDelayMs)), 1),
      loopDelayP99Ms: round(median(sliced.map((s) => s.p99DelayMs)), 1),
    };
    log(`validation ${n} steps`, line);
    emitLine(line);
  }
  for (const n of o.runSizes) {
    const rt = createRuntime();
    const plan = referencingPlan(n);
    maybeGc();
    const r = await withLoopDelay(async () => {
      const compiled = await rt.validateAsync(plan);
      return rt.run(plan, { compiled }).result;
    });
    if (r.value.status !== "completed") throw new Error(`run ended ${r.value.status}`);
    const line = {
      suite: "validation-run",
      steps: n,
      runMs: round(r.ms, 0),
      msPerStep: round(r.ms / n, 3),
      loopDelayMaxMs: round(r.maxDelayMs, 1),
      loopDelayP99Ms: round(r.p99DelayMs, 1),
    };
    log(`run ${n} steps`, line);
    emitLine(line);
  }
}
