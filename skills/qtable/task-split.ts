/**
 * qtable.task.split: a goal → tasks with dependencies. With a model: its answer, checked against
 * the task-list rules (task-list.ts); a bad answer gets one repair round naming the problems; only
 * then the goal kind's template answers, and the output and a warning say it is a template.
 * Without a model: the template, labelled as such.
 */
import { z } from "zod";
import { defineSkill } from "../../src/skills/contract.js";
import { isUnreadable } from "./model-answer.js";
import { checkTaskList, MAX_SPLIT_TASKS } from "./task-list.js";
import { GOAL_KINDS, templateTasks } from "./templates.js";
import { assignBalanced, foreignAssignees, teamOf } from "./team.js";
import { TaskSchema } from "./schemas.js";

/**
 * The seam for a model: the raw answer for a goal (checked by the skill, never trusted). `repair`
 * carries the previous answer's problems on the second call. Throwing `UnreadableAnswer`
 * (model-answer.ts) means "not JSON of the shape" (repaired); anything else, "no answer".
 */
export type SplitWith = (
  goal: string,
  context: unknown,
  signal: AbortSignal,
  repair?: { problems: string },
) => Promise<unknown>;

export const SplitInputSchema = z
  .object({
    goal: z.string().trim().min(1).max(20_000).describe("What to plan, in words"),
    context: z.unknown().optional().describe("Anything the decomposition should take into account (team, constraints)"),
  })
  .strict();
export const SplitOutputSchema = z.object({
  tasks: z.array(TaskSchema).min(1).max(200),
  /** model: the model's tasks (after `repairRounds` repairs); template: the deterministic split. */
  source: z.enum(["model", "template"]),
  /** The goal's kind the template was chosen by (also given with a model, for the estimator's sake). */
  kind: z.enum(GOAL_KINDS),
  repairRounds: z.number().int().min(0).max(1),
  warnings: z.array(z.string()),
});

export function taskSplitSkill(opts: { splitWith?: SplitWith } = {}) {
  return defineSkill({
    name: "qtable.task.split",
    description: opts.splitWith
      ? `Split a goal into at most ${MAX_SPLIT_TASKS} tasks with dependencies ({ key, title, description, dependsOn }) with the configured model; its answer is checked (unique keys, dependencies that exist, no cycles, sizes bounded) and repaired once; if it still fails, a template for the goal's kind (software, event, campaign, migration, hiring, research, project) answers, with source "template" and a warning.`
      : 'Split a goal into tasks with dependencies ({ key, title, description, dependsOn }) from a template for the goal\'s kind (software, event, campaign, migration, hiring, research, project), worded after the goal and its listed parts. No model is configured: the output says source "template" and warns that it is one.',
    input: SplitInputSchema,
    output: SplitOutputSchema,
    sideEffects: "none",
    idempotent: true,
    estimateDurationMs: () => (opts.splitWith ? 5_000 : 1),
    async execute(args, ctx) {
      const template = templateTasks(args.goal, args.context);
      const team = teamOf(args.context);
      const asTemplate = (why: string, repairRounds: 0 | 1) => ({
        tasks: assignBalanced(template.tasks, team),
        source: "template" as const,
        kind: template.kind,
        repairRounds,
        warnings: [
          `${why}: these tasks are the "${template.kind}" template worded after the goal, not an analysis of it`,
        ],
      });
      if (!opts.splitWith) return asTemplate("no model is configured", 0);
      let problems: string | undefined;
      for (const round of [0, 1] as const) {
        let raw: unknown;
        try {
          raw = await opts.splitWith(
            args.goal,
            args.context,
            ctx.signal,
            problems === undefined ? undefined : { problems },
          );
        } catch (e) {
          if (ctx.signal.aborted) throw e; // cancelled or timed out: not a model problem
          if (!isUnreadable(e))
            return asTemplate(`the model did not answer (${(e as Error).message.slice(0, 300)})`, round);
          problems = e.message; // not JSON of the shape: repaired like any bad answer
          continue;
        }
        const checked = checkTaskList(raw);
        const foreign = checked.ok ? foreignAssignees(checked.tasks, team) : undefined;
        if (checked.ok && foreign === undefined)
          return {
            tasks: checked.tasks,
            source: "model" as const,
            kind: template.kind,
            repairRounds: round,
            warnings: [],
          };
        problems = checked.ok ? foreign! : checked.problems;
      }
      return asTemplate(`the model's tasks were invalid twice (last: ${problems!.slice(0, 300)})`, 1);
    },
  });
}
