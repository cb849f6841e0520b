/**
 * Pure: a run view → the compact result the tools answer with (ToolChainRunResult) and a short
 * text summary a model or a person can read. Shared by every agent surface; no transport here.
 */
import type { RunView } from "../kernel/run-view.js";
import { versionChangeLines } from "../kernel/version-notice.js";
import { ToolChainPlanSchema, type ToolChainPlanInput } from "../plan/schema.js";
import { stepAsks } from "../plan/admission.js";
import type { SkillRegistry } from "../skills/registry.js";
import type { PlanningOutcome } from "../planner/index.js";
import type { PendingStep, PlanToolChainResult, ToolChainRunResult } from "./definitions.js";

type ViewLike = Pick<RunView, "runId" | "status" | "plan" | "steps" | "pendingConfirmations" | "result" | "error">;

const OUTPUT_SHOWN = new Set(["completed", "rolled_back", "rollback_failed"]);

export function toRunResult(view: ViewLike): ToolChainRunResult {
  const pending: PendingStep[] = view.pendingConfirmations.map((p) => ({
    stepId: p.stepId,
    skillName: p.skillName,
    arguments: p.arguments ?? null,
    preview: p.preview ?? null,
    kind: p.kind ?? (p.inDoubt ? "in_doubt" : "confirmation"),
    round: p.round ?? 0,
    ...(p.versionChanged ? { versionChanged: p.versionChanged } : {}),
  }));
  return {
    runId: view.runId,
    status: view.status,
    ...(view.plan.goal ? { goal: view.plan.goal } : {}),
    pending,
    steps: view.steps.map((s) => ({
      stepId: s.stepId,
      skillName: s.skillName,
      status: s.status,
      attempts: s.attempts,
      ...(OUTPUT_SHOWN.has(s.status) && s.output !== null && s.output !== undefined ? { output: s.output } : {}),
      ...(s.error ? { error: { code: s.error.code, message: s.error.message } } : {}),
    })),
    ...(view.result ? { outputs: view.result.outputs, memory: view.result.memory } : {}),
    ...(view.error
      ? {
          error: {
            code: view.error.code,
            message: view.error.message,
            ...(view.error.details !== undefined ? { details: view.error.details } : {}),
          },
        }
      : {}),
  };
}

/** JSON on one line, cut to `max` characters (the structured result carries the whole value). */
export function brief(value: unknown, max = 300): string {
  const s = JSON.stringify(value) ?? "null";
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

/** Text cut to `max` characters. */
export function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

const PENDING_HINT: Record<NonNullable<PendingStep["kind"]>, string> = {
  confirmation: "approve to run it, reject to skip it",
  in_doubt: "its process died while it ran: approve retries it, mark_done records it as done, reject fails it",
  compensation: "its compensation failed: approve retries it, skip leaves it undone, reject stops the rollback",
};

export function runSummary(r: ToolChainRunResult): string {
  const lines = [`Run ${r.runId}: ${r.status}${r.goal ? ` (goal: ${clip(r.goal, 200)})` : ""}`];
  lines.push(
    `Steps: ${r.steps.map((s) => `${s.stepId} ${s.status}${s.error ? ` (${s.error.code})` : ""}`).join(", ")}`,
  );
  if (r.pending.length) {
    lines.push(
      "Waiting for a decision (ask the user, then call confirm_tool_chain_step with runId, stepId and the decision):",
    );
    for (const p of r.pending) {
      lines.push(
        `- ${p.stepId} (${p.skillName}): ${PENDING_HINT[p.kind ?? "confirmation"]}. Preview: ${brief(p.preview)}. Arguments: ${brief(p.arguments)}`,
      );
      for (const l of versionChangeLines(p, (v) => brief(v))) lines.push(`  ${l}`);
    }
  }
  for (const s of r.steps) if (s.output !== undefined) lines.push(`Output of ${s.stepId}: ${brief(s.output)}`);
  if (r.error) lines.push(`Error ${r.error.code}: ${r.error.message}`);
  return lines.join("\n");
}

/** A planner's outcome → the normalised plan (defaults filled in), who wrote it, and its outline. */
/**
 * The plan outline an agent sees. "Asks for confirmation" is the runtime's own rule
 * (src/kernel/confirmation.ts): a step whose fallback skill asks, or whose rule depends on
 * arguments only known at run time, is reported as asking.
 */
export function toPlanResult(
  out: Pick<PlanningOutcome, "planner" | "warnings"> & { plan: ToolChainPlanInput },
  registry: Pick<SkillRegistry, "get">,
): PlanToolChainResult {
  const parsed = ToolChainPlanSchema.parse(out.plan);
  return {
    plan: parsed,
    planner: { ...out.planner },
    warnings: out.warnings.map((w) => ({ ...w })),
    steps: parsed.steps.map((s) => ({
      stepId: s.stepId,
      skillName: s.skillName,
      dependsOn: s.dependsOn,
      requiresConfirmation: stepAsks(registry, s),
    })),
  };
}

export function planSummary(r: PlanToolChainResult): string {
  const by =
    r.planner.kind === "llm"
      ? `written by ${r.planner.model ?? "the model"}`
      : `written by the fallback planner${r.planner.fallbackReason ? ` (${r.planner.fallbackReason})` : ""}`;
  const lines = [
    `Plan${r.plan.goal ? ` for: ${clip(r.plan.goal, 200)}` : ""} (${r.steps.length} steps, ${by}; not run yet: pass it to run_tool_chain as \`plan\`):`,
  ];
  for (const s of r.steps) {
    lines.push(
      `- ${s.stepId}: ${s.skillName}${s.dependsOn.length ? ` after ${s.dependsOn.join(", ")}` : ""}${s.requiresConfirmation ? " (asks for confirmation)" : ""}`,
    );
  }
  for (const w of r.warnings) lines.push(`Note${w.stepId ? ` on ${w.stepId}` : ""}: ${w.message}`);
  return lines.join("\n");
}
