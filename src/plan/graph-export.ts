/** The plan's DAG as data and as Mermaid, optionally coloured by step status. */
import type { ToolChainPlan } from "./schema.js";

export interface PlanGraph {
  nodes: { id: string; skillName: string; status?: string }[];
  edges: { from: string; to: string }[];
  mermaid: string;
}

export function exportPlanGraph(
  plan: Pick<ToolChainPlan, "steps">,
  statusOf: (id: string) => string | undefined = () => undefined,
): PlanGraph {
  const nodes = plan.steps.map((s) => {
    const status = statusOf(s.stepId);
    return status ? { id: s.stepId, skillName: s.skillName, status } : { id: s.stepId, skillName: s.skillName };
  });
  const edges = plan.steps.flatMap((s) => [...new Set(s.dependsOn)].map((d) => ({ from: d, to: s.stepId })));
  const lines = ["flowchart TD"];
  for (const n of nodes)
    lines.push(`  ${n.id}["${n.id}<br/>${n.skillName.replace(/"/g, "'")}${n.status ? `<br/>${n.status}` : ""}"]`);
  for (const e of edges) lines.push(`  ${e.from} --> ${e.to}`);
  const byStatus = new Map<string, string[]>();
  for (const n of nodes) {
    if (!n.status) continue;
    const ids = byStatus.get(n.status);
    // appended in place: copying the list per node made a 10,000-step view cost O(n²) allocation
    if (ids) ids.push(n.id);
    else byStatus.set(n.status, [n.id]);
  }
  const colours: Record<string, string> = {
    completed: "fill:#d4f7d4",
    failed: "fill:#f7d4d4",
    running: "fill:#d4e4f7",
    waiting_confirmation: "fill:#f7f0d4",
    skipped: "fill:#eeeeee",
    cancelled: "fill:#eeeeee",
    rolled_back: "fill:#e8d4f7",
    rollback_failed: "fill:#f7b0b0",
  };
  for (const [st, ids] of byStatus)
    if (colours[st]) lines.push(`  classDef ${st} ${colours[st]}`, `  class ${ids.join(",")} ${st}`);
  return { nodes, edges, mermaid: lines.join("\n") };
}
