/**
 * The team a split assigns tasks to: `context.team` as names (strings, or objects with `name`,
 * `email` or `id`). Pure. Without a team nobody is assigned (a template cannot know who does
 * what); with one, a template's tasks go to whoever has the least estimated work so far (in task
 * order, so dependent work spreads), and a model's assignees must be members.
 */
import { estimateTask } from "./estimate-heuristics.js";
import type { Task } from "./schemas.js";

const MAX_TEAM = 100;

export function teamOf(context: unknown): string[] {
  if (!context || typeof context !== "object" || Array.isArray(context)) return [];
  const team = (context as { team?: unknown }).team;
  if (!Array.isArray(team)) return [];
  const names = team
    .map((m) => {
      if (typeof m === "string") return m.trim();
      if (m && typeof m === "object") {
        const o = m as Record<string, unknown>;
        const v = [o.name, o.email, o.id].find((x) => typeof x === "string" && x.trim() !== "");
        return typeof v === "string" ? v.trim() : "";
      }
      return "";
    })
    .filter((n) => n.length > 0 && n.length <= 320);
  return [...new Set(names)].slice(0, MAX_TEAM);
}

/** Each task to the member with the least estimated work so far (ties: the team's order). */
export function assignBalanced<T extends Task>(tasks: readonly T[], team: readonly string[]): T[] {
  if (!team.length) return [...tasks];
  const load = new Map(team.map((n) => [n, 0]));
  return tasks.map((t) => {
    if (t.assignee) return t;
    let who = team[0]!;
    for (const n of team) if (load.get(n)! < load.get(who)!) who = n;
    load.set(who, load.get(who)! + estimateTask(t).expected);
    return { ...t, assignee: who };
  });
}

/** A model's assignees outside the team, worded for the repair prompt; undefined: all fine. */
export function foreignAssignees(tasks: readonly Task[], team: readonly string[]): string | undefined {
  if (!team.length) return undefined;
  const bad = tasks.filter((t) => t.assignee !== undefined && !team.includes(t.assignee));
  if (!bad.length) return undefined;
  return `assignees must be members of the context's team (${team.join(", ")}): ${bad
    .map((t) => `task "${t.key}" is assigned to ${JSON.stringify(t.assignee)}`)
    .join("; ")}`;
}

/** Capacities the team gives (`context.team: [{ name, capacity }]`), for the Gantt's levelling. */
export function teamCapacities(context: unknown): { name: string; capacity: number }[] {
  if (!context || typeof context !== "object" || Array.isArray(context)) return [];
  const team = (context as { team?: unknown }).team;
  if (!Array.isArray(team)) return [];
  const out = new Map<string, number>();
  for (const m of team) {
    if (!m || typeof m !== "object") continue;
    const o = m as Record<string, unknown>;
    const name = [o.name, o.email, o.id].find((x) => typeof x === "string" && x.trim() !== "") as string | undefined;
    const c = o.capacity;
    if (name && typeof c === "number" && c > 0 && c <= 1 && !out.has(name.trim())) out.set(name.trim(), c);
  }
  return [...out].map(([name, capacity]) => ({ name, capacity }));
}
