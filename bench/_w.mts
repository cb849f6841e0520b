import { randomWindowDag } from "./dag.js";
import { runRuntime, runReadyQueue } from "./scheduling.js";
let w = 0; process.on("warning", (x) => { if (x.name === "MaxListenersExceededWarning") w++; });
for (const n of [50, 200, 1000]) {
  const dag = randomWindowDag(n, 7 + n);
  const a = await runRuntime(dag, undefined); const b = await runReadyQueue(dag);
  console.log(n, "runtime/cp", (a / dag.criticalPathMs).toFixed(3), "rq/cp", (b / dag.criticalPathMs).toFixed(3), "cp", dag.criticalPathMs);
}
await new Promise((r) => setTimeout(r, 50));
console.log("warnings", w);
