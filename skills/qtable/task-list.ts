/**
 * The task-list check every split answer passes before anyone uses it: the shape (keys, titles,
 * sizes bounded), unique keys, dependencies that name tasks, no cycles. Pure; its problems are
 * worded for a repair prompt and for the step's warning.
 */
import { z } from "zod";
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { orderTasks } from "./gantt.js";
import { TaskSchema, type Task } from "./schemas.js";

export const MAX_SPLIT_TASKS = 60;
export const TaskListSchema = z.object({ tasks: z.array(TaskSchema).min(1).max(MAX_SPLIT_TASKS) });

/** `raw` may be `{ tasks: [...] }` or the array itself (models answer both). */
export function checkTaskList(raw: unknown): { ok: true; tasks: Task[] } | { ok: false; problems: string } {
  const candidate = Array.isArray(raw) ? { tasks: raw } : dropNulls(raw);
  const parsed = TaskListSchema.safeParse(candidate);
  if (!parsed.success) return { ok: false, problems: z.prettifyError(parsed.error).replace(/\n/g, "; ") };
  try {
    orderTasks(parsed.data.tasks); // duplicate keys, dangling dependencies, cycles: named
    phasesOf(parsed.data.tasks);
  } catch (e) {
    return { ok: false, problems: (e as Error).message };
  }
  return { ok: true, tasks: parsed.data.tasks };
}

/** Strict-schema providers send null for absent optional fields: read them as absent. */
function dropNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(dropNulls);
  if (v && typeof v === "object")
    return Object.fromEntries(
      Object.entries(v)
        .filter(([, x]) => x !== null)
        .map(([k, x]) => [k, dropNulls(x)]),
    );
  return v;
}

/**
 * The phases of a task list, in order of first use: a phase's key is no task's, and every task
 * of a phase gives it the same title. INVALID_INPUT names the phase otherwise.
 */
export function phasesOf(tasks: readonly Pick<Task, "key" | "phase">[]): { key: string; title: string }[] {
  const keys = new Set(tasks.map((t) => t.key));
  const out = new Map<string, string>();
  for (const t of tasks) {
    if (!t.phase) continue;
    const { key, title } = t.phase;
    const bad = keys.has(key)
      ? `phase "${key}" has the key of a task`
      : out.has(key) && out.get(key) !== title
        ? `phase "${key}" has two titles: ${JSON.stringify(out.get(key))} and ${JSON.stringify(title)}`
        : undefined;
    if (bad) throw new ToolchainError(ErrorCode.INVALID_INPUT, bad, { effectStarted: false });
    out.set(key, title);
  }
  return [...out].map(([key, title]) => ({ key, title }));
}
