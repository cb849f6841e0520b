/**
 * `toolchain plan --request "…" [--context '<json>'] [--memory '<json>']`: plan a request with the
 * runtime's planner (the model when TOOLCHAIN_PLANNER_MODEL is set, else the deterministic
 * fallback) and print `{ plan, planner, warnings, usage, repairRounds, durationMs }` as JSON on
 * stdout (pipe `.plan` into `toolchain run`); the DAG in Mermaid and the warnings go to stderr.
 * Nothing runs.
 */
import { MemoryTableStore, qtableSkills } from "../../skills/qtable/index.js";
import { exportPlanGraph } from "../plan/graph-export.js";
import type { Runtime } from "../runtime/runtime.js";

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

export async function planCommand(runtime: Runtime, args: string[]): Promise<number> {
  const request = flag(args, "--request");
  if (!request?.trim()) {
    console.error('usage: toolchain plan --request "<what to do>" [--context \'<json>\'] [--memory \'<json>\']');
    return 2;
  }
  const context = JSON.parse(flag(args, "--context") ?? "{}") as unknown;
  const memory = JSON.parse(flag(args, "--memory") ?? "{}") as Record<string, unknown>;
  // planning reads only the skills' metadata: make sure the QTable pack's is there even where the
  // process did not register the pack (no table is read or written here)
  if (!runtime.registry.has("qtable.task.split")) for (const s of qtableSkills({ store: new MemoryTableStore() })) runtime.registry.register(s);
  const out = await runtime.plan(request, { context, memory });
  console.log(JSON.stringify({ plan: out.plan, planner: out.planner, warnings: out.warnings, usage: out.usage ?? null, repairRounds: out.repairRounds, durationMs: out.durationMs }, null, 2));
  for (const w of out.warnings) console.error(`warning ${w.code}: ${w.message}`);
  console.error(`planner: ${out.planner.kind}${out.planner.model ? ` (${out.planner.model})` : ""}${out.planner.fallbackReason ? `, fallback because ${out.planner.fallbackReason}: ${out.planner.fallbackDetail}` : ""}`);
  console.error(exportPlanGraph(out.plan).mermaid);
  return 0;
}
