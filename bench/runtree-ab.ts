/**
 * Diagnostic (not part of `npm run bench`): what langsmith's `RunTree`, built by `@langchain/core`
 * for every runnable call (`AsyncLocalStorageProvider.runWithConfig`, tracing off), costs a step,
 * measured side by side. bench/profile-overhead.ts is bundled twice: as shipped, and with that one
 * construction replaced by a plain object carrying the config (the upstream change proposed; not
 * applied by this project, see README "Where each target stands"). The two bundles run
 * interleaved, runtime chain and bare `task()` chain, on MemorySaver; JSON medians per bundle.
 *   npx tsx bench/runtree-ab.ts [steps=1000] [reps=8] [rounds=3]
 */
import { spawnSync } from "node:child_process";
import { loadavg } from "node:os";
import { readFileSync, writeFileSync } from "node:fs";
import { bundleEntry } from "../scripts/bundle.js";
import { emitLine, median, round } from "./timing.js";

const [steps = "1000", reps = "8", rounds = "3"] = process.argv.slice(2);
const stock = await bundleEntry("bench/profile-overhead.ts");
const BUILT = /runTree = new RunTree\(\{\s*name: "<runnable_lambda>",\s*tracingEnabled: false\s*\}\);/;
const source = readFileSync(stock, "utf8");
if (!BUILT.test(source)) throw new Error("runWithConfig's RunTree construction not found: @langchain/core changed");
const carrier = stock.replace(/\.mjs$/, "-carrier.mjs");
writeFileSync(carrier, source.replace(BUILT, "runTree = {};"));

/** ms per step of each rep after the first two (warm-up), from profile-overhead's log lines. */
function perStep(file: string, variant: string): number[] {
  const r = spawnSync(process.execPath, [file, variant, "chain", steps, reps], { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`${variant} failed: ${r.stderr}`);
  return [...r.stderr.matchAll(/([\d.]+) ms\/step/g)].map((m) => Number(m[1])).slice(2);
}

const load1 = loadavg()[0]!;
const samples: Record<string, number[]> = {};
for (let r = 0; r < Number(rounds); r++) {
  for (const [name, file] of Object.entries({ stock, carrier })) {
    for (const variant of ["runtime", "bareTask"])
      (samples[`${name}.${variant}`] ??= []).push(...perStep(file, variant));
  }
}
const med = (k: string) => median(samples[k]!);
emitLine({
  suite: "runtree-ab",
  shape: "chain",
  steps: Number(steps),
  msPerStep: Object.fromEntries(Object.keys(samples).map((k) => [k, round(med(k), 4)])),
  savedMsPerStep: {
    runtime: round(med("stock.runtime") - med("carrier.runtime"), 4),
    bareTask: round(med("stock.bareTask") - med("carrier.bareTask"), 4),
  },
  shareOfBareTaskStep: round(1 - med("carrier.bareTask") / med("stock.bareTask"), 3),
  ratioRuntimeToBareTask: {
    stock: round(med("stock.runtime") / med("stock.bareTask"), 3),
    carrier: round(med("carrier.runtime") / med("carrier.bareTask"), 3),
  },
  load1: [round(load1, 2), round(loadavg()[0]!, 2)],
});
