/**
 * `toolchain plan --request "…" [--context '<json>'] [--memory '<json>'] [--workspace <id>]`: plan a request with the
 * runtime's planner (the model when TOOLCHAIN_PLANNER_MODEL is set, else the deterministic
 * fallback) and print `{ plan, planner, warnings, usage, repairRounds, durationMs }` as JSON on
 * stdout (pipe `.plan` into `toolchain run`); the DAG in Mermaid and the warnings go to stderr.
 * Nothing runs.
 */
import { exportPlanGraph } from "../plan/graph-export.js";
import type { Runtime } from "../runtime/runtime.js";

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

export async function planCommand(runtime: Runtime, args: string[]): Promise<number> {
  const request = flag(args, "--request");
  if (!request?.trim()) {
    console.error('usage: toolchain plan --request "<what to do>" [--context \'<json>\'] [--memory \'<json>\'] [--workspace <id>]');
    return 2;
  }
  const context = JSON.parse(flag(args, "--context") ?? "{}") as unknown;
  const memory = JSON.parse(flag(args, "--memory") ?? "{}") as Record<string, unknown>;
  const workspaceId = flag(args, "--workspace");
  const out = await runtime.plan(request, { context, memory, ...(workspaceId ? { workspaceId } : {}) });
  console.log(JSON.stringify({ plan: out.plan, planner: out.planner, warnings: out.warnings, usage: out.usage ?? null, repairRounds: out.repairRounds, durationMs: out.durationMs }, null, 2));
  for (const w of out.warnings) console.error(`warning ${w.code}: ${w.message}`);
  console.error(`planner: ${out.planner.kind}${out.planner.model ? ` (${out.planner.model})` : ""}${out.planner.fallbackReason ? `, fallback because ${out.planner.fallbackReason}: ${out.planner.fallbackDetail}` : ""}`);
  console.error(exportPlanGraph(out.plan).mermaid);
  return 0;
}
