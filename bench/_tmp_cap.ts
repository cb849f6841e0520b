import { createRuntime } from "../src/index.js";
import { noopPlan } from "./overhead.js";
import { now } from "./timing.js";
for (const cap of [undefined, 64, undefined, 64]) {
  const rt = createRuntime();
  const plan = { ...noopPlan(4000, "fanout"), ...(cap ? { maxConcurrency: cap } : {}) };
  const t0 = now();
  const v = await rt.run(plan).result;
  console.log(`fanout 4000 maxConcurrency=${cap ?? "unlimited"}: ${((now() - t0) / 4000).toFixed(3)} ms/step ${v.status}`);
}
