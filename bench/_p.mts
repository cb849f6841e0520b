import { randomWindowDag } from "./dag.js";
import { runRuntime } from "./scheduling.js";
const dag = randomWindowDag(1000, 1007);
await runRuntime(randomWindowDag(100, 5), undefined);
const t = await runRuntime(dag, undefined);
console.log("ratio", (t / dag.criticalPathMs).toFixed(3));
