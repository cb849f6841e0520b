/** qtable.task.split: a goal → tasks with dependencies (the planner's model, else deterministic). */
import { z } from "zod";
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { defineSkill } from "../../src/skills/contract.js";
import { decomposeGoal } from "./decompose.js";
import { orderTasks } from "./gantt.js";
import { TaskSchema, type Task } from "./schemas.js";

/** The seam for a model: returns tasks for a goal (validated like the deterministic ones). */
export type SplitWith = (goal: string, context: unknown, signal: AbortSignal) => Promise<Task[]>;

export const SplitInputSchema = z
  .object({
    goal: z.string().trim().min(1).max(20_000).describe("What to plan, in words"),
    context: z.unknown().optional().describe("Anything the decomposition should take into account (team, constraints)"),
  })
  .strict();
export const SplitOutputSchema = z.object({ tasks: z.array(TaskSchema).min(1).max(200) });

export function taskSplitSkill(opts: { splitWith?: SplitWith } = {}) {
  return defineSkill({
    name: "qtable.task.split",
    description:
      "Split a goal into tasks with dependencies ({ key, title, description, dependsOn }). Uses the planner's model when one is configured, otherwise a deterministic decomposition (requirements → design → build per listed part → test, docs → rollout) worded after the goal.",
    input: SplitInputSchema,
    output: SplitOutputSchema,
    sideEffects: "none",
    idempotent: true,
    estimateDurationMs: () => (opts.splitWith ? 5_000 : 1),
    async execute(args, ctx) {
      if (!opts.splitWith) return { tasks: decomposeGoal(args.goal, args.context) };
      const raw = await opts.splitWith(args.goal, args.context, ctx.signal);
      const parsed = SplitOutputSchema.safeParse({ tasks: raw });
      if (!parsed.success) throw new ToolchainError(ErrorCode.INVALID_OUTPUT, `the model's tasks do not match the task shape: ${z.prettifyError(parsed.error).replace(/\n/g, "; ")}`);
      orderTasks(parsed.data.tasks); // dangling or cyclic dependencies: INVALID_INPUT naming them
      return parsed.data;
    },
  });
}
