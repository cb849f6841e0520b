/**
 * `toolchain plan --request "…" [--context <json>] [--memory <json>] [--workspace <id>] [--out plan.json]`:
 * plan a request with the runtime's planner (the model when TOOLCHAIN_PLANNER_MODEL is set, else
 * the deterministic fallback), locally or on a server (`--url`). Nothing runs. It prints the plan
 * as the tree `run` will draw, each step's arguments, the planner and its warnings; `--json`
 * prints `{ plan, planner, warnings, usage, repairRounds, durationMs }` (its `.plan`, or the whole
 * document, is what `toolchain run` takes); `--out` writes the plan to a file.
 */
import { esc } from "./escape.js";
import { writeFileSync } from "node:fs";
import type { Backend } from "./backend.js";
import { printJson, type Ctx } from "./context.js";
import { Exit, jsonArg, jsonObjectArg, usage } from "./exit.js";
import { layoutTree } from "./model.js";
import { paint } from "./render.js";

export async function planCommand(ctx: Ctx, b: Backend, o: Record<string, unknown>): Promise<number> {
  const request = o.request as string | undefined;
  if (!request?.trim()) throw usage('plan: --request "<what to do>"');
  const context = jsonArg(o.context as string | undefined, "--context") ?? {};
  const memory = jsonObjectArg(o.memory as string | undefined, "--memory") ?? {};
  const out = await b.plan(request, { context, memory });
  if (o.out) writeFileSync(o.out as string, `${JSON.stringify(out.plan, null, 2)}\n`);
  if (ctx.json) {
    printJson(ctx, {
      plan: out.plan,
      planner: out.planner,
      warnings: out.warnings,
      usage: out.usage ?? null,
      repairRounds: out.repairRounds,
      durationMs: out.durationMs,
      asks: out.asks ?? [],
    });
    return Exit.ok;
  }
  const p = out.planner;
  // the plan is a model's output: every part of it is data (src/cli/escape.ts)
  ctx.out(
    esc(
      `planned by the ${p.kind} planner${p.model ? ` (${p.model})` : ""}${p.fallbackReason ? `: ${p.fallbackReason}, ${p.fallbackDetail}` : ""} in ${out.durationMs} ms`,
    ),
  );
  if (out.plan.goal) ctx.out(paint(ctx.style, "dim", `goal: ${esc(out.plan.goal)}`));
  ctx.out("");
  const steps = out.plan.steps;
  const byId = new Map(steps.map((s) => [s.stepId, s]));
  for (const r of layoutTree(steps.map((s) => ({ stepId: s.stepId, dependsOn: s.dependsOn ?? [] })))) {
    const s = byId.get(r.stepId)!;
    const flags = esc(
      [
        s.requireConfirmation ? "asks for confirmation" : "",
        r.alsoAfter.length ? `after ${r.alsoAfter.join(", ")}` : "",
      ]
        .filter(Boolean)
        .join(" · "),
    );
    ctx.out(
      `  ${r.prefix}${paint(ctx.style, "bold", esc(s.stepId))}  ${paint(ctx.style, "dim", esc(s.skillName))}${flags ? `  ${flags}` : ""}`,
    );
    const args = esc(JSON.stringify(s.arguments ?? {}));
    const indent = `  ${r.prefix.replace(/├─ $/, "│  ").replace(/└─ $/, "   ")}   `;
    ctx.out(`${indent}${paint(ctx.style, "dim", args.length > 140 ? `${args.slice(0, 139)}…` : args)}`);
  }
  for (const w of out.warnings) ctx.out(paint(ctx.style, "yellow", esc(`warning ${w.code}: ${w.message}`)));
  ctx.out("");
  ctx.out(
    o.out
      ? `written to ${String(o.out)}; run it: npx toolchain run ${String(o.out)}`
      : 'to run it: npx toolchain plan --request "…" --out plan.json && npx toolchain run plan.json (or: npx toolchain run --request "…")',
  );
  return Exit.ok;
}
