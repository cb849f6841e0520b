/**
 * Arguments a person edited before approving, checked against the skill the wait is about (a
 * step's fallback skill when it waits to run that): one check for every surface, the REST/CLI/MCP
 * decision (src/runtime/admit-decision.ts) and a resume value given to the graph (LangGraph's
 * server, Agent Inbox: graphs/approval-node.ts). Throws INVALID_ARGUMENTS naming the skill.
 */
import { z } from "zod";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import type { PendingConfirmation } from "../kernel/pending.js";
import type { ToolChainPlan } from "../plan/schema.js";
import type { SkillRegistry } from "./registry.js";

export function checkEditedArguments(
  stepId: string,
  args: Record<string, unknown>,
  pending: PendingConfirmation,
  plan: ToolChainPlan,
  registry: SkillRegistry,
): void {
  const step = plan.steps.find((s) => s.stepId === stepId)!;
  const skill = registry.get(pending.skillName) ?? registry.get(step.skillName)!;
  const r = skill.input.safeParse(args);
  if (!r.success)
    throw new ToolchainError(
      ErrorCode.INVALID_ARGUMENTS,
      `edited arguments do not match ${skill.name}: ${z.prettifyError(r.error).replace(/\n/g, "; ")}`,
    );
}
