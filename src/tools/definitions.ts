/**
 * The tool-chain tools as a model sees them: names, descriptions written for a model, and
 * zod input/output schemas. Shared by every agent surface (the MCP server in src/mcp, LangChain
 * tools), so a model meets the same contract everywhere. No transport imports here.
 *
 * Input schemas are zod objects; their JSON Schema (zod's `toJSONSchema`, io "input") is what
 * clients list. Plan problems beyond the schema (unknown skill, allowlist, cycles, references)
 * are found by the runtime's validation and answered with its codes (SKILL_NOT_ALLOWED, …).
 */
import { z } from "zod";
import { DecisionSchema } from "../kernel/decision.js";
import { VersionChangeSchema } from "../kernel/pending.js";
import { RunStatus, StepStatus } from "../kernel/status.js";
import { ToolChainPlanSchema } from "../plan/schema.js";

export const TOOL_NAMES = [
  "plan_tool_chain",
  "run_tool_chain",
  "get_tool_chain_run",
  "confirm_tool_chain_step",
  "cancel_tool_chain_run",
  "redrive_tool_chain_run",
] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

const RunIdSchema = z.string().min(1).max(200).describe("The runId returned by run_tool_chain.");
const ContextSchema = z
  .record(z.string(), z.unknown())
  .describe(
    'Facts the chain may read through `{ "$ref": "context.<path>" }` arguments, e.g. { "table": { "id": "tbl_1" } }.',
  );
const RequestTextSchema = z.string().min(1).max(20_000);

// ---- inputs ---------------------------------------------------------------------------------

export const PlanToolChainInputSchema = z
  .object({
    request: RequestTextSchema.describe("What the user wants done, in words (one task or several)."),
    context: ContextSchema.optional(),
  })
  .strict();
export type PlanToolChainInput = z.infer<typeof PlanToolChainInputSchema>;

export const RunToolChainInputSchema = z
  .object({
    request: RequestTextSchema.optional().describe(
      "What to do, in words: the server's planner writes the plan, then it runs. Send this or `plan`, not both.",
    ),
    plan: ToolChainPlanSchema.optional().describe(
      "A ToolChainPlan to run as given (e.g. from plan_tool_chain): steps with stepId, skillName, arguments, dependsOn. " +
        'An argument may be { "$ref": "steps.<stepId>.<path>" } (output of a dependency), { "$ref": "context.<path>" } or { "$ref": "memory.<key>" }.',
    ),
    context: ContextSchema.optional(),
    memory: z
      .record(z.string(), z.unknown())
      .optional()
      .describe('Initial chain memory, read through `{ "$ref": "memory.<key>" }`.'),
  })
  .strict()
  .refine((v) => (v.request === undefined) !== (v.plan === undefined), {
    message: "send exactly one of `request` or `plan`",
    path: ["plan"],
  });
export type RunToolChainInput = z.infer<typeof RunToolChainInputSchema>;

export const GetToolChainRunInputSchema = z.object({ runId: RunIdSchema }).strict();
export type GetToolChainRunInput = z.infer<typeof GetToolChainRunInputSchema>;

/** The kernel's decision (src/kernel/decision.ts) with descriptions written for a model. */
export const ConfirmToolChainStepInputSchema = z
  .object({
    runId: RunIdSchema,
    stepId: z.string().min(1).max(64).describe("The waiting step (from `pending[].stepId`)."),
  })
  .extend(DecisionSchema.pick({ decision: true, arguments: true, output: true, comment: true, round: true }).shape)
  .extend({
    decision: DecisionSchema.shape.decision.describe(
      "approve: run the step (or retry it); reject: do not run it (the step fails with REJECTED). For a step in doubt after a crash, mark_done: it already happened. For a failed compensation, skip: leave it undone.",
    ),
    arguments: DecisionSchema.shape.arguments.describe(
      "approve only: corrected arguments for the step (validated against the skill's input schema again).",
    ),
    output: DecisionSchema.shape.output.describe("mark_done only: the output to record for the step."),
    comment: DecisionSchema.shape.comment.describe("Why, for the audit trail."),
    round: DecisionSchema.shape.round.describe(
      "The wait answered (from `pending[].round`). Send it: a decision for a round the step no longer waits in is refused (CONFIRMATION_NOT_PENDING), never applied to a later wait.",
    ),
  })
  .strict();
export type ConfirmToolChainStepInput = z.infer<typeof ConfirmToolChainStepInputSchema>;

export const CancelToolChainRunInputSchema = z
  .object({
    runId: RunIdSchema,
    reason: z.string().max(2_000).optional().describe("Why, for the audit trail."),
  })
  .strict();
export type CancelToolChainRunInput = z.infer<typeof CancelToolChainRunInputSchema>;

export const RedriveToolChainRunInputSchema = z
  .object({
    runId: RunIdSchema,
    overrides: z
      .record(z.string(), z.record(z.string(), z.unknown()))
      .optional()
      .describe(
        "Per failed step id, argument fields to change before it runs again (checked against the skill's input schema).",
      ),
  })
  .strict();
export type RedriveToolChainRunInput = z.infer<typeof RedriveToolChainRunInputSchema>;

// ---- outputs --------------------------------------------------------------------------------

const ErrorSchema = z.looseObject({ code: z.string(), message: z.string(), details: z.unknown().optional() });

export const PendingStepSchema = z.looseObject({
  stepId: z.string(),
  skillName: z.string(),
  arguments: z.unknown().describe("The step's resolved arguments (what will be executed on approve)."),
  preview: z.unknown().describe("What the step would do, computed without side effects."),
  kind: z.enum(["confirmation", "in_doubt", "compensation"]).optional(),
  round: z.number().int().optional().describe("Which wait of the step this is: pass it back with the decision."),
  versionChanged: VersionChangeSchema.optional().describe(
    "A deploy changed the step's skill while it waited: approving runs the new version, with these arguments and preview where they differ. Tell the user before they decide.",
  ),
});
export type PendingStep = z.infer<typeof PendingStepSchema>;

export const StepSummarySchema = z.object({
  stepId: z.string(),
  skillName: z.string(),
  status: z.enum(Object.values(StepStatus) as [StepStatus, ...StepStatus[]]),
  attempts: z.number().int(),
  output: z.unknown().optional(),
  error: ErrorSchema.optional(),
});

/** What run/get/confirm/cancel answer: the run's state, compact enough for a model's context. */
export const ToolChainRunResultSchema = z.object({
  runId: z.string(),
  status: z.enum(Object.values(RunStatus) as [RunStatus, ...RunStatus[]]),
  goal: z.string().optional(),
  pending: z
    .array(PendingStepSchema)
    .describe("Steps waiting for a decision: answer each with confirm_tool_chain_step."),
  steps: z.array(StepSummarySchema),
  outputs: z.record(z.string(), z.unknown()).optional().describe("Outputs of completed steps, by stepId."),
  memory: z.record(z.string(), z.unknown()).optional(),
  error: ErrorSchema.optional(),
});
export type ToolChainRunResult = z.infer<typeof ToolChainRunResultSchema>;

export const PlanToolChainResultSchema = z.object({
  plan: ToolChainPlanSchema.describe("The plan: pass it to run_tool_chain as `plan` (edit it first if needed)."),
  planner: z.looseObject({
    kind: z.enum(["llm", "fallback"]).describe("llm: a model wrote the plan; fallback: the deterministic planner did"),
    model: z.string().optional(),
    fallbackReason: z.string().optional(),
  }),
  warnings: z
    .array(z.looseObject({ code: z.string(), stepId: z.string().optional(), message: z.string() }))
    .describe("Changes the runtime made to the written plan, or notes about it"),
  steps: z
    .array(
      z.object({
        stepId: z.string(),
        skillName: z.string(),
        dependsOn: z.array(z.string()),
        requiresConfirmation: z.boolean(),
      }),
    )
    .describe("The plan in outline"),
});
export type PlanToolChainResult = z.infer<typeof PlanToolChainResultSchema>;

// ---- the tools ------------------------------------------------------------------------------

export interface ToolDefinition {
  name: ToolName;
  title: string;
  description: string;
  inputSchema: z.ZodType;
  outputSchema: z.ZodObject;
  /** MCP tool annotations (plain hints, also useful to other surfaces). */
  annotations: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };
}

export const planToolChainTool = {
  name: "plan_tool_chain",
  title: "Plan a tool chain",
  description:
    "Turn a request in words into a tool-chain plan (a DAG of skill calls) without running anything. " +
    "Use it to show the user what would happen, or to adjust the plan before passing it to run_tool_chain as `plan`. " +
    "Only skills allowed for this workspace are used.",
  inputSchema: PlanToolChainInputSchema,
  outputSchema: PlanToolChainResultSchema,
  annotations: { readOnlyHint: true, openWorldHint: false },
} satisfies ToolDefinition;

/** What run_tool_chain does, for every surface; each adds how confirmations reach the user there. */
export const RUN_TOOL_CHAIN_DESCRIPTION =
  "Run a tool chain: either `request` (words; the server plans it) or `plan` (a plan from plan_tool_chain or written by you). " +
  "Steps run in dependency order, in parallel where possible, with retries and compensation on failure. " +
  "Returns the run's status, step outputs and errors. ";

export const runToolChainTool = {
  name: "run_tool_chain",
  title: "Run a tool chain",
  description:
    RUN_TOOL_CHAIN_DESCRIPTION +
    "Steps with side effects may need the user's confirmation: " +
    'if the result has status "waiting_confirmation", show the user each `pending` step (its preview and arguments), ask them, ' +
    "and answer with confirm_tool_chain_step; never approve on the user's behalf.",
  inputSchema: RunToolChainInputSchema,
  outputSchema: ToolChainRunResultSchema,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
} satisfies ToolDefinition;

export const getToolChainRunTool = {
  name: "get_tool_chain_run",
  title: "Get a tool-chain run",
  description:
    "The current state of a run: status, each step's status and output, errors, and the steps waiting for confirmation.",
  inputSchema: GetToolChainRunInputSchema,
  outputSchema: ToolChainRunResultSchema,
  annotations: { readOnlyHint: true, openWorldHint: false },
} satisfies ToolDefinition;

export const confirmToolChainStepTool = {
  name: "confirm_tool_chain_step",
  title: "Confirm a waiting step",
  description:
    "Record the user's decision for a step that waits for confirmation (listed in `pending`), then continue the run until it finishes or waits again. " +
    "Only send the decision the user actually gave. approve runs the step (optionally with corrected `arguments`); reject fails it and the run's failure policy applies.",
  inputSchema: ConfirmToolChainStepInputSchema,
  outputSchema: ToolChainRunResultSchema,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
} satisfies ToolDefinition;

export const redriveToolChainRunTool = {
  name: "redrive_tool_chain_run",
  title: "Redrive a failed tool-chain run",
  description:
    "Run a failed run again from where it failed, once its outside cause is fixed (an operator's action: only when the user asks). Completed steps keep their results and are never executed again; failed, skipped and not-started steps run again with the same idempotency keys. Refused for a run that is running, waiting or completed. Returns the run as it executes again.",
  inputSchema: RedriveToolChainRunInputSchema,
  outputSchema: ToolChainRunResultSchema,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
} satisfies ToolDefinition;

export const cancelToolChainRunTool = {
  name: "cancel_tool_chain_run",
  title: "Cancel a tool-chain run",
  description:
    "Cancel a run: running steps are aborted, nothing new starts, and completed steps with side effects are compensated (undone) where possible. Returns the final state.",
  inputSchema: CancelToolChainRunInputSchema,
  outputSchema: ToolChainRunResultSchema,
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: true },
} satisfies ToolDefinition;
