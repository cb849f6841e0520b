/**
 * What the graph takes and gives back when it is invoked as a LangGraph graph (Studio, the
 * LangGraph server and SDK, a parent graph). The input is exactly `{ plan | request, context?,
 * memory?, runId? }`: nothing else from an input reaches state, so a caller cannot forge step
 * records, decisions or a status. What the runtime knows about a run and a caller must not
 * choose (its workspace, the skill allowlist, its creation time) travels in
 * `configurable.toolchain_seed`, read once by the planner node.
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { z } from "zod";
import { RunStatus, StepStatus } from "../src/kernel/status.js";
import { ToolChainPlanSchema } from "../src/plan/schema.js";
import type { RunSeed } from "../src/kernel/run-state.js";

const Obj = () => z.record(z.string(), z.unknown());

export const GraphInputSchema = z
  .object({
    plan: ToolChainPlanSchema.optional().describe(
      "The ToolChainPlan to run: steps with stepId, skillName, arguments, dependsOn (see the README's plan format). Give this or `request`.",
    ),
    request: z
      .string()
      .min(1)
      .max(20_000)
      .optional()
      .describe("What to do, in words: the planner node writes the plan (used when no plan is given)."),
    // any JSON value, as over the REST API (an object is what references can walk into)
    context: z
      .unknown()
      .optional()
      .describe(
        'Facts the steps read through { "$ref": "context.<path>" }, usually an object, e.g. { "table": { "id": "…" } }.',
      ),
    memory: Obj().optional().describe('Initial chain memory, read through { "$ref": "memory.<key>" }.'),
    runId: z.string().min(1).max(200).optional().describe("The run's id (default: the thread id)."),
  })
  .strict();
export type GraphInput = z.input<typeof GraphInputSchema>;

const ErrorOut = z.object({ code: z.string(), message: z.string(), details: z.unknown().optional() }).nullable();

export const GraphOutputSchema = z.object({
  runId: z.string(),
  status: z.enum(Object.values(RunStatus) as [RunStatus, ...RunStatus[]]),
  plan: ToolChainPlanSchema,
  steps: z.record(
    z.string(),
    z.looseObject({
      status: z.enum(Object.values(StepStatus) as [StepStatus, ...StepStatus[]]),
      attempts: z.number(),
      output: z.unknown().optional(),
      error: ErrorOut.optional(),
    }),
  ),
  memory: Obj(),
  error: ErrorOut,
  planning: z
    .unknown()
    .nullable()
    .describe("Which planner wrote the plan, its warnings and usage (null when the plan was given)."),
});

export type { RunSeed };

export const SEED_KEY = "toolchain_seed";

export function seedOf(config: LangGraphRunnableConfig): RunSeed {
  const s = (config.configurable as Record<string, unknown> | undefined)?.[SEED_KEY];
  return s && typeof s === "object" ? (s as RunSeed) : {};
}

export function threadIdOf(config: LangGraphRunnableConfig): string | undefined {
  const t = (config.configurable as Record<string, unknown> | undefined)?.thread_id;
  return typeof t === "string" && t ? t : undefined;
}
