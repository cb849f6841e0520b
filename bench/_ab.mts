import { runtimeRun } from "./overhead.js";
const g = globalThis as { __sharedSignal?: boolean };
process.on("warning", () => undefined);
const res: Record<string, number[]> = { "shared chain": [], "fanout chain": [], "shared fanout": [], "fanout fanout": [] };
await runtimeRun(200, "fanout");
for (let r = 0; r < 11; r++) for (const shape of ["chain"] as const) for (const mode of r % 2 ? ["shared", "fanout"] : ["fanout", "shared"]) {
  g.__sharedSignal = mode === "shared";
  res[`${mode} ${shape}`]!.push(await runtimeRun(1000, shape) / 1000);
}
const med = (x: number[]) => [...x].sort((a, b) => a - b)[x.length >> 1]!;
for (const [k, v] of Object.entries(res)) console.log(k, med(v).toFixed(3), "ms/step");
