/**
 * Pure: a waiting step → the question put to the user through MCP elicitation (form mode), and
 * the user's answer → what the run does. accept = approve, decline = reject, cancel (the user
 * dismissed the question) = cancel the run.
 */
import type { ElicitRequestFormParams, ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import type { DecisionValue } from "../kernel/decision.js";
import { versionChangeLines } from "../kernel/version-notice.js";
import type { PendingStep } from "../tools/definitions.js";
import { brief, clip } from "../tools/results.js";

export type Answer =
  | { kind: "decide"; decision: Extract<DecisionValue, "approve" | "reject">; comment?: string }
  | { kind: "cancel_run"; comment?: string };

export function confirmationQuestion(
  runId: string,
  goal: string | undefined,
  step: PendingStep,
): ElicitRequestFormParams {
  const lines = [
    `Step "${step.stepId}" (${step.skillName}) of tool-chain run ${runId} waits for your confirmation before it runs.`,
    ...(goal ? [`Goal: ${clip(goal, 300)}`] : []),
    `Preview: ${brief(step.preview, 1_500)}`,
    `Arguments: ${brief(step.arguments, 1_500)}`,
    ...versionChangeLines(step, (v) => brief(v, 1_500)),
    "Accept runs the step; decline skips it (the step fails as rejected); cancel stops the whole run.",
  ];
  return {
    mode: "form",
    message: lines.join("\n"),
    requestedSchema: {
      type: "object",
      properties: {
        comment: {
          type: "string",
          title: "Comment",
          description: "Optional: recorded with your decision.",
          maxLength: 4_000,
        },
      },
    },
  };
}

export function answerOf(result: ElicitResult): Answer {
  const c = result.content?.comment;
  const comment = typeof c === "string" && c.trim() ? c.trim().slice(0, 4_000) : undefined;
  const withComment = comment ? { comment } : {};
  if (result.action === "accept") return { kind: "decide", decision: "approve", ...withComment };
  if (result.action === "decline") return { kind: "decide", decision: "reject", ...withComment };
  return { kind: "cancel_run", ...withComment };
}
