/** qtable.task.estimate: tasks → effort in days (heuristics, or the model when configured). */
import { z } from "zod";
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { defineSkill } from "../../src/skills/contract.js";
import { estimateTask } from "./decompose.js";
import { TaskKeySchema, TaskSchema, type Task } from "./schemas.js";

export interface Estimate {
  key: string;
  days: number;
  confidence: number;
}
/** The seam for a model: one estimate per task (validated: every task once, days > 0). */
export type EstimateWith = (tasks: Task[], signal: AbortSignal) => Promise<Estimate[]>;

export const EstimateInputSchema = z.object({ tasks: z.array(TaskSchema).min(1).max(1_000) }).strict();
export const EstimateOutputSchema = z.object({
  estimates: z.array(z.object({ key: TaskKeySchema, days: z.number().positive(), confidence: z.number().min(0).max(1) })),
});

export function taskEstimateSkill(opts: { estimateWith?: EstimateWith } = {}) {
  return defineSkill({
    name: "qtable.task.estimate",
    description:
      "Estimate each task's effort in working days (> 0, half-day steps) with a confidence in [0, 1]: deterministic heuristics from what the task does (research, design, build, test, docs, rollout) and how much it carries, or the planner's model when configured.",
    input: EstimateInputSchema,
    output: EstimateOutputSchema,
    sideEffects: "none",
    idempotent: true,
    estimateDurationMs: () => (opts.estimateWith ? 5_000 : 1),
    async execute(args, ctx) {
      const keys = args.tasks.map((t) => t.key);
      if (new Set(keys).size !== keys.length) throw new ToolchainError(ErrorCode.INVALID_INPUT, `duplicate task keys: ${[...new Set(keys.filter((k, i) => keys.indexOf(k) !== i))].join(", ")}`, { effectStarted: false });
      if (!opts.estimateWith) return { estimates: args.tasks.map(estimateTask) };
      const raw = await opts.estimateWith(args.tasks, ctx.signal);
      const parsed = EstimateOutputSchema.safeParse({ estimates: raw });
      if (!parsed.success) throw new ToolchainError(ErrorCode.INVALID_OUTPUT, `the model's estimates do not match: ${z.prettifyError(parsed.error).replace(/\n/g, "; ")}`);
      const got = new Set(parsed.data.estimates.map((e) => e.key));
      const missing = keys.filter((k) => !got.has(k));
      if (missing.length || got.size !== parsed.data.estimates.length) throw new ToolchainError(ErrorCode.INVALID_OUTPUT, `the model must estimate every task exactly once (missing: ${missing.join(", ") || "none"})`);
      return parsed.data;
    },
  });
}
