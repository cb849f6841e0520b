/**
 * The deterministic fallback planner (no model): a request to plan, estimate or schedule work
 * becomes split → (estimate ‖ describe the target table's schema) → Gantt → create the task
 * records in the context's table (the write waits for confirmation), over the QTable skills.
 * Anything else is refused with PLANNING_FAILED naming what was understood. Pure.
 */
import { today, workspaceCalendar } from "../../skills/qtable/calendar.js";
import { parseGoal } from "../../skills/qtable/decompose.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import type { ToolChainPlanInput } from "../plan/schema.js";
import type { PlanWarning } from "./warnings.js";
import { businessCoordinates } from "./coordinates.js";

export const FALLBACK_SKILLS = {
  split: "qtable.task.split",
  estimate: "qtable.task.estimate",
  gantt: "qtable.gantt.generate",
  schema: "qtable.table.schema.describe",
  records: "qtable.task.records.create",
} as const;

export type Intent = "plan" | "estimate" | "timeline" | "records";

const INTENT_WORDS: Record<Intent, RegExp> = {
  plan: /\b(plan|planning|break\s+(?:it\s+)?down|decompose|split\s+(?:it\s+)?into|tasks?|work\s+breakdown)\b/i,
  estimate: /\b(estimat\w*|effort|how\s+long|sizing|size\s+it)\b/i,
  timeline: /\b(timeline|gantt|schedul\w*|roadmap|calendar|milestones?)\b/i,
  records: /\b(tables?|records?|rows?|put\s+.*\binto|insert|save\s+.*\bto|add\s+.*\bto)\b/i,
};

export interface Understanding {
  /** What the work is about, in the request's words. */
  goal: string;
  intents: Intent[];
  /** The target table's id from the context, if any. */
  table: string | null;
}

/** The subject of a request: "Plan an approval system, estimate …" → "an approval system". */
export function goalOf(request: string): string {
  const first =
    request
      .trim()
      .split(
        /(?:[,;:.!?\n]|\s+(?:and\s+then|then|and)\s+(?=estimat|build|creat|put|make|generat|schedul|add|insert|sav))/i,
      )[0] ?? request;
  const stripped = first
    .replace(
      /^\s*(?:please\s+|can\s+you\s+|could\s+you\s+|help\s+me\s+)?(?:plan(?:\s+out)?|break\s+down|decompose|estimate|schedule|design|build|create|implement|develop)\s+/i,
      "",
    )
    .trim();
  return (stripped || request.trim()).slice(0, 500);
}

export function understand(request: string, context: unknown): Understanding {
  const intents = (Object.keys(INTENT_WORDS) as Intent[]).filter((i) => INTENT_WORDS[i].test(request));
  return { goal: goalOf(request), intents, table: businessCoordinates(context).table?.id ?? null };
}

/** Clauses of a request: "…, estimate it and then announce it in #approvals" → three. */
const CLAUSE_BREAK = /[,;!?\n]+|\.(?=\s|$)|\s+(?:and\s+then|and\s+also|then|and|also)\s+/i;
/** Actions the fallback planner never performs (it has no skill step for them). */
const OTHER_ACTIONS =
  /^(?:please\s+|also\s+|then\s+|finally\s+)*(announce|notify|send|e-?mail|mail|post|message|tell|inform|share|publish|deploy|ping|invite|book|call|remind|assign|print|delete|remove|alert|tweet|text|order|buy|pay|approve|sign|upload|export|download|translate|summari[sz]e|review|update|close|merge|release|ship)\b/i;
const ADDRESSED = /(^|\s)[#@][\w-]+|\b[\w.+-]+@[\w-]+\.[\w.]+\b/;

/**
 * The parts of the request the fallback plan does not do: a clause that asks for another action
 * ("announce it in #approvals", "email the team") or addresses someone, and none of the plan's.
 */
export function droppedParts(request: string): string[] {
  return request
    .split(CLAUSE_BREAK)
    .map((c) => c.trim())
    .filter(
      (c, i) =>
        c !== "" &&
        (OTHER_ACTIONS.test(c) || (i > 0 && ADDRESSED.test(c))) &&
        !(Object.keys(INTENT_WORDS) as Intent[]).some((k) => k !== "records" && INTENT_WORDS[k].test(c)),
    );
}

const ISO_DATE = /^\d{4}-\d{2}-\d{2}$/;

export interface FallbackInput {
  request: string;
  context: unknown;
  /** Whether this workspace may use a skill (registered and allowed). */
  available(name: string): boolean;
  now: number;
}

export interface FallbackPlan {
  plan: ToolChainPlanInput;
  warnings: PlanWarning[];
  understood: Understanding;
}

export function fallbackPlan(input: FallbackInput): FallbackPlan {
  const understood = understand(input.request, input.context);
  const fail = (message: string, extra: Record<string, unknown> = {}) =>
    new ToolchainError(ErrorCode.PLANNING_FAILED, message, { details: { understood, ...extra } });
  if (!understood.intents.some((i) => i === "plan" || i === "estimate" || i === "timeline")) {
    throw fail(
      `the fallback planner only plans, estimates and schedules work; understood the goal ${JSON.stringify(understood.goal)}` +
        `${understood.intents.length ? ` with intent ${understood.intents.join(", ")}` : " with no planning, estimation or timeline intent"}` +
        `${understood.table ? ` on table ${understood.table}` : ""}: send a plan, or configure a model (TOOLCHAIN_PLANNER_MODEL)`,
    );
  }
  const coords = businessCoordinates(input.context);
  const needed = [
    FALLBACK_SKILLS.split,
    FALLBACK_SKILLS.estimate,
    FALLBACK_SKILLS.gantt,
    ...(coords.table ? [FALLBACK_SKILLS.schema, FALLBACK_SKILLS.records] : []),
  ];
  const missing = needed.filter((n) => !input.available(n));
  if (missing.length) {
    throw fail(
      `the fallback planner needs ${missing.join(", ")}, which this workspace cannot use (not registered or not in its allowlist); understood the goal ${JSON.stringify(understood.goal)}`,
      { missingSkills: missing },
    );
  }
  const ctx = input.context as Record<string, unknown> | null;
  const startDate =
    typeof ctx?.startDate === "string" && ISO_DATE.test(ctx.startDate)
      ? { $ref: "context.startDate" }
      : today(input.now, workspaceCalendar(ctx).timeZone).date; // the workspace's today, not UTC's
  const calendar = {
    ...(Array.isArray(ctx?.holidays) ? { holidays: { $ref: "context.holidays" } } : {}),
    ...(Array.isArray(ctx?.workdays) ? { workdays: { $ref: "context.workdays" } } : {}),
  };
  const tasks = { $ref: "steps.split.tasks" };
  const estimates = { $ref: "steps.estimate.estimates" };
  const steps: ToolChainPlanInput["steps"] = [
    {
      stepId: "split",
      skillName: FALLBACK_SKILLS.split,
      // the team (context.team) gets the tasks assigned
      arguments: {
        goal: input.request.slice(0, 20_000),
        ...(Array.isArray(ctx?.team) ? { context: { team: { $ref: "context.team" } } } : {}),
      },
      description: "Split the goal into tasks with dependencies",
    },
    {
      stepId: "estimate",
      skillName: FALLBACK_SKILLS.estimate,
      dependsOn: ["split"],
      arguments: { tasks },
      description: "Estimate each task in days",
    },
  ];
  if (coords.table) {
    steps.push({
      stepId: "schema",
      skillName: FALLBACK_SKILLS.schema,
      dependsOn: ["split"],
      arguments: { tableId: { $ref: coords.table.ref } },
      description: "Describe the target table's schema",
    });
  }
  steps.push({
    stepId: "gantt",
    skillName: FALLBACK_SKILLS.gantt,
    dependsOn: ["estimate"],
    arguments: { tasks, estimates, startDate, ...calendar },
    description: "Schedule the tasks on working days",
  });
  const warnings: PlanWarning[] = [];
  if (coords.table) {
    steps.push({
      stepId: "create",
      skillName: FALLBACK_SKILLS.records,
      dependsOn: ["gantt", "schema"],
      // the goal's subject ("approval system"): a later request for it, even with other parts,
      // re-plans these rows (and marks those it no longer has removed)
      arguments: {
        tableId: { $ref: coords.table.ref },
        goal: parseGoal(understood.goal).subject || understood.goal,
        tasks,
        estimates,
        gantt: { $ref: "steps.gantt" },
      },
      requireConfirmation: true,
      description: "Create the task records in the target table (after confirmation)",
    });
  } else {
    warnings.push({
      code: "no_target_table",
      message:
        "the context names no target table (context.table.id): the plan stops at the timeline and writes no records",
    });
  }
  for (const part of droppedParts(input.request)) {
    warnings.push({
      code: "request_part_dropped",
      message: `the plan leaves out ${JSON.stringify(part.slice(0, 200))}: the fallback planner only splits, estimates and schedules work and writes the task records (send a plan, or configure a model, for the rest)`,
    });
  }
  return { plan: { planId: "fallback-task-plan", goal: input.request.slice(0, 10_000), steps }, warnings, understood };
}
