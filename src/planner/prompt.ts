/**
 * The planner's prompt: what the model is told about the plan format, the request, the context's
 * business coordinates (target table and its schema) and the skills this workspace may use.
 * Pure: builds plain message objects.
 */
import type { SkillManifestEntry } from "../skills/registry.js";
import type { PlanIssue } from "../plan/validate.js";

export interface PromptMessage {
  role: "system" | "user";
  content: string;
}

/** Where the run's data lives: the table the request is about, if the context names one. */
export interface BusinessCoordinates {
  table?: { id: string; ref: string; name?: string; schema?: unknown };
}

export const SYSTEM_PROMPT = `You are the planner of a tool-chain runtime. You turn a request into a ToolChainPlan: a DAG of steps, each calling one skill from the manifest you are given. The runtime, not you, executes the plan; it validates it first and refuses anything invalid.

Rules:
- Use only skills from the manifest, with arguments that match their input schema exactly (no extra fields).
- stepId: letters, digits, '_' or '-', starting with a letter. Every step lists in dependsOn the steps it needs.
- Pass data between steps with references instead of copying values: {"$ref": "steps.<stepId>.<path>"} reads a dependency's output (the step must be in dependsOn, directly or transitively), {"$ref": "context.<path>"} reads the run's context. Array indices are path segments.
- Steps that do not depend on each other run in parallel: do not add dependencies that are not needed.
- Do not set retry, timeoutMs, rollback, requireConfirmation or acceptNoCompensation: the runtime derives them from each skill's metadata (anything you propose is clamped to what the skill allows).
- No cycles. Keep the plan as small as the request allows.
Answer only with the plan, as one JSON object.`;

/** The manifest as the model sees it: what each skill does, takes, returns and touches. */
export function manifestForPrompt(manifest: readonly SkillManifestEntry[]): unknown[] {
  return manifest.map((s) => ({
    name: s.name,
    description: s.description,
    inputSchema: s.inputSchema,
    ...(s.outputSchema ? { outputSchema: s.outputSchema } : {}),
    sideEffects: s.sideEffects,
    idempotent: s.idempotent,
    requiresConfirmation: s.requiresConfirmation,
    compensable: s.compensable,
  }));
}

const MAX_CONTEXT_CHARS = 8_000;

export function buildPrompt(input: { request: string; context: unknown; coordinates: BusinessCoordinates; manifest: readonly SkillManifestEntry[] }): PromptMessage[] {
  const contextJson = JSON.stringify(input.context ?? {});
  const parts = [
    `Request:\n${input.request}`,
    input.coordinates.table
      ? `Target table: ${JSON.stringify({ id: input.coordinates.table.id, ...(input.coordinates.table.name ? { name: input.coordinates.table.name } : {}) })}; reference its id as {"$ref": "${input.coordinates.table.ref}"}.` +
        (input.coordinates.table.schema !== undefined ? `\nTable schema:\n${JSON.stringify(input.coordinates.table.schema)}` : "")
      : "The context names no target table.",
    `Run context (readable with {"$ref": "context.…"}):\n${contextJson.length > MAX_CONTEXT_CHARS ? `${contextJson.slice(0, MAX_CONTEXT_CHARS)}… (truncated)` : contextJson}`,
    `Skills you may use:\n${JSON.stringify(manifestForPrompt(input.manifest))}`,
  ];
  return [
    { role: "system", content: SYSTEM_PROMPT },
    { role: "user", content: parts.join("\n\n") },
  ];
}

/** The repair round: the model's previous answer and the exact validation issues. */
export function repairMessage(previous: unknown, issues: readonly Pick<PlanIssue, "code" | "message">[]): PromptMessage {
  return {
    role: "user",
    content:
      `Your plan was refused by the runtime's validation:\n${JSON.stringify(previous)}\n\nIssues:\n` +
      issues.map((i) => `- ${i.code}: ${i.message}`).join("\n") +
      "\n\nAnswer with a corrected plan that fixes every issue.",
  };
}
