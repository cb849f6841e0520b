#!/usr/bin/env node
/**
 * `toolchain` CLI. Commands: `demo` (run the demo plan), `run <plan.json> [--context <json>]`,
 * `validate <plan.json>`, `skills` (print the skill manifest).
 */
import { readFile } from "node:fs/promises";
import { createRuntime } from "../runtime/runtime.js";
import { demoPlan } from "./demo-plan.js";

function fmt(e: { seq: number; type: string; stepId?: string; data: Record<string, unknown> }): string {
  const extra = e.type === "step_retrying" ? ` attempt ${e.data.attempt} failed, retry in ${e.data.delayMs} ms` : e.type === "step_failed" ? ` ${(e.data.error as { code: string }).code}` : "";
  return `#${String(e.seq).padStart(3)} ${e.type.padEnd(26)} ${e.stepId ?? ""}${extra}`;
}

async function main(argv: string[]): Promise<number> {
  const [cmd = "demo", file, ...rest] = argv;
  const rt = createRuntime();
  const ctxIdx = rest.indexOf("--context");
  const context = ctxIdx >= 0 ? JSON.parse(rest[ctxIdx + 1] ?? "{}") : { table: "tbl_demo" };
  if (cmd === "skills") {
    console.log(JSON.stringify(rt.registry.manifest(), null, 2));
    return 0;
  }
  const plan = cmd === "demo" ? demoPlan : JSON.parse(await readFile(file ?? "", "utf8"));
  if (cmd === "validate") {
    const c = rt.validate(plan, { context });
    console.log(`valid: ${c.steps.length} steps; topological order: ${c.topo.join(", ")}`);
    return 0;
  }
  if (cmd !== "demo" && cmd !== "run") {
    console.error(`unknown command "${cmd}". Commands: demo, run <plan.json>, validate <plan.json>, skills`);
    return 2;
  }
  const h = rt.run(plan, { context });
  for await (const e of h.events) console.log(fmt(e));
  const view = await h.result;
  console.log(JSON.stringify({ runId: view.runId, status: view.status, result: view.result, error: view.error }, null, 2));
  console.log(view.graph.mermaid);
  return view.status === "completed" ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    console.error(e?.code ? `${e.code}: ${e.message}` : e);
    process.exit(e?.code ? 2 : 1);
  },
);
