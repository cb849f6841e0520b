/**
 * The planner's model for `qtable.task.split` (the pack's `splitWith` seam): when a model is
 * configured, the goal is split by it (structured output bound to the task list schema); when the
 * model fails, times out or answers tasks that do not hold together, the pack's deterministic
 * decomposition answers instead, so a flaky model never fails the step.
 */
import { z } from "zod";
import { decomposeGoal, type SplitWith, type Task } from "../../skills/qtable/index.js";
import { TaskSchema } from "../../skills/qtable/schemas.js";
import { resolvePlannerConfig, type PlannerOptions } from "./config.js";
import { chatModel } from "./llm-planner.js";

const TaskListSchema = z.object({ tasks: z.array(TaskSchema).min(1).max(200) });

const SYSTEM = `Split the goal into 3 to 15 concrete tasks for a team. Each task: key (short, letters, digits, '-', unique), title, description, dependsOn (keys of tasks that must finish first; no cycles). Answer only with the task list.`;

/** True when every dependency names a task and there is no cycle. */
function holdsTogether(tasks: readonly Task[]): boolean {
  const keys = new Map(tasks.map((t) => [t.key, t]));
  if (keys.size !== tasks.length || tasks.some((t) => t.dependsOn.some((d) => !keys.has(d)))) return false;
  const state = new Map<string, 1 | 2>();
  const visit = (k: string): boolean => {
    if (state.get(k) === 2) return true;
    if (state.get(k) === 1) return false;
    state.set(k, 1);
    if (!keys.get(k)!.dependsOn.every(visit)) return false;
    state.set(k, 2);
    return true;
  };
  return tasks.every((t) => visit(t.key));
}

/** `splitWith` for the QTable pack, or undefined when no model is configured. */
export function modelTaskSplitter(opts: PlannerOptions): SplitWith | undefined {
  const config = resolvePlannerConfig(opts);
  if (!config.model) return undefined;
  const runnable = chatModel({ ...config, model: config.model }).withStructuredOutput(TaskListSchema, { name: "TaskList", method: config.method });
  return async (goal, context, signal) => {
    try {
      const out = await runnable.invoke(
        [
          { role: "system", content: SYSTEM },
          { role: "user", content: `Goal: ${goal}${context === undefined ? "" : `\nContext: ${JSON.stringify(context).slice(0, 4_000)}`}` },
        ],
        { signal: AbortSignal.any([signal, AbortSignal.timeout(config.timeoutMs)]) },
      );
      const { tasks } = TaskListSchema.parse(out); // defaults applied
      if (holdsTogether(tasks)) return tasks;
    } catch (e) {
      if (signal.aborted) throw e; // the step was cancelled or timed out: not a model problem
    }
    return decomposeGoal(goal, context) as Task[];
  };
}
