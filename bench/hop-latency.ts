/**
 * Diagnostic (not part of `npm run bench`): where does a chain of waits lose time? Runs a chain
 * of probe steps (each waits `ms` and records when its body starts and ends) through the runtime
 * and through the bare task() baseline, and prints the median gap between one step's end and the
 * next step's start (scheduling hop), the median timer overshoot, and the fixed run overhead.
 *   npx tsx bench/hop-latency.ts [steps=30] [ms=20]
 */
import { Annotation, END, MemorySaver, START, StateGraph, task } from "@langchain/langgraph";
import { createRuntime } from "../src/index.js";
import { marks, probeSkill as probe } from "./probe.js";
import { emitLine, median, now, round, sleep } from "./timing.js";

function summarize(variant: string, total: number, n: number, ms: number) {
  const gaps = marks.slice(1).map((m, i) => m.start - marks[i]!.end);
  const over = marks.map((m) => m.end - m.start - ms);
  emitLine({
    suite: "hop-latency",
    variant,
    steps: n,
    waitMs: ms,
    totalMs: round(total, 1),
    overheadMs: round(total - n * ms, 1),
    medianHopMs: round(median(gaps), 3),
    medianTimerOvershootMs: round(median(over), 3),
    beforeFirstMs: round(marks[0]!.start, 1),
    afterLastMs: round(total - marks[n - 1]!.end, 1),
  });
}

const n = Number(process.argv[2] ?? 30);
const ms = Number(process.argv[3] ?? 20);

for (let rep = 0; rep < 2; rep++) {
  {
    const rt = createRuntime({ skills: [probe] });
    const plan = {
      steps: Array.from({ length: n }, (_, i) => ({
        stepId: `s${i}`,
        skillName: "bench.probe",
        dependsOn: i ? [`s${i - 1}`] : [],
        arguments: { ms, i },
      })),
    };
    marks.length = 0;
    const t0 = now();
    const v = await rt.run(plan).result;
    const total = now() - t0;
    if (v.status !== "completed") throw new Error(v.status);
    for (const m of marks) ((m.start -= t0), (m.end -= t0));
    if (rep) summarize("runtime", total, n, ms);
  }
  {
    const probeTask = task("probe", async (i: number) => {
      const start = now();
      await sleep(ms);
      marks[i] = { start, end: now() };
      return null;
    });
    const g = new StateGraph(Annotation.Root({ x: Annotation<number>() }))
      .addNode("run", async () => {
        for (let i = 0; i < n; i++) await probeTask(i);
        return { x: 1 };
      })
      .addEdge(START, "run")
      .addEdge("run", END)
      .compile({ checkpointer: new MemorySaver() });
    marks.length = 0;
    const t0 = now();
    await g.invoke({ x: 0 }, { configurable: { thread_id: "t" } });
    const total = now() - t0;
    for (const m of marks) ((m.start -= t0), (m.end -= t0));
    if (rep) summarize("bareTask", total, n, ms);
  }
}
