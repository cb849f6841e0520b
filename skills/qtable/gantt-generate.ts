/** qtable.gantt.generate: tasks + estimates → dated items on a working-day calendar (pure). */
import { z } from "zod";
import { defineSkill } from "../../src/skills/contract.js";
import { today, workspaceCalendar } from "./calendar.js";
import { generateGantt } from "./gantt.js";
import { teamCapacities } from "./team.js";
import { HOLIDAY_LOCALES } from "./holidays.js";
import type { TableStore } from "./store.js";
import { EstimateSchema, GanttSchema, IsoDateSchema, TaskKeySchema, TaskSchema } from "./schemas.js";

export const GanttLinkSchema = z
  .object({
    from: TaskKeySchema.describe("The predecessor's key"),
    to: TaskKeySchema.describe("The successor's key"),
    type: z
      .enum(["FS", "SS", "FF"])
      .describe(
        "FS: to starts after from finishes; SS: to starts after from starts; FF: to finishes after from finishes",
      ),
    lag: z
      .number()
      .multipleOf(0.5)
      .min(-365)
      .max(365)
      .optional()
      .describe("Working days (half days allowed) after (negative: before) the predecessor's start/finish; default 0"),
  })
  .strict();

export const GanttInputSchema = z
  .object({
    tasks: z.array(TaskSchema).min(1).max(1_000),
    estimates: z.array(EstimateSchema).max(1_000),
    startDate: IsoDateSchema.optional().describe(
      "The first day work may start (YYYY-MM-DD); default today in the calendar's time zone",
    ),
    workdays: z
      .array(z.number().int().min(1).max(7))
      .min(1)
      .max(7)
      .optional()
      .describe("ISO weekday numbers, 1 = Monday … 7 = Sunday; default the workspace calendar's (Monday–Friday)"),
    locale: z
      .enum(HOLIDAY_LOCALES)
      .optional()
      .describe(
        "Built-in public holidays: intl (New Year's Day, Christmas Day), US, GB, DE, FR, NL, CA, AU, or none; default the workspace calendar's (context.calendar.locale, TOOLCHAIN_HOLIDAY_LOCALE, else intl)",
      ),
    holidays: z
      .array(IsoDateSchema)
      .max(1_000)
      .optional()
      .describe(
        "The team's own days off, in addition to the locale's; default the workspace calendar's (context.calendar.holidays)",
      ),
    links: z
      .array(GanttLinkSchema)
      .max(2_000)
      .optional()
      .describe(
        "Dependencies beyond dependsOn (finish-to-start): SS / FF / FS with a lag; a link replaces the dependsOn entry for the same pair",
      ),
    milestones: z
      .array(TaskKeySchema)
      .max(1_000)
      .optional()
      .describe("Keys of tasks with no duration (they need no estimate)"),
    assignees: z
      .array(
        z
          .object({
            name: z.string().min(1).max(320),
            capacity: z.number().gt(0).max(1).optional().describe("Share of a working day they give; default 1"),
          })
          .strict(),
      )
      .max(1_000)
      .optional()
      .describe(
        "Capacities of the tasks' assignees (an assignee not listed works full days); default the context's team ([{ name, capacity }])",
      ),
  })
  .strict();

export const ganttGenerateSkill = (store: TableStore) =>
  defineSkill({
    name: "qtable.gantt.generate",
    description:
      "Schedule tasks on working days (critical-path method): dependsOn are finish-to-start, `links` add start-to-start / finish-to-finish / finish-to-start with a lag; `end` is inclusive; time is booked in half days (startsAtMidday / endsAtMidday mark a half; other fractions round up to a half day); a task's assignee works one task at a time at their capacity (resource levelling: a task moved after its assignee's other task names it in waitsFor); weekends (per `workdays`), the built-in public holidays of `locale` (default: New Year's Day and Christmas Day) and the team's `holidays` are skipped; what the arguments leave out (startDate: today; workdays, locale, holidays; assignees' capacities) comes from the workspace calendar (context.calendar, then the workspace's stored calendar, then the configuration) and context.team; `milestones` take no time. Returns items with slack, every tied critical chain (criticalPaths; criticalPath is the first) and the finish date. Cyclic or dangling dependencies and duplicate estimates fail with INVALID_INPUT naming them.",
    input: GanttInputSchema,
    output: GanttSchema,
    sideEffects: "none",
    idempotent: true,
    estimateDurationMs: () => 1,
    async execute(args, ctx) {
      // what the arguments leave out comes from the workspace calendar (calendar.ts) and the team
      const cal = workspaceCalendar(ctx.context, process.env, await store.getCalendar(ctx.workspaceId));
      const team = teamCapacities(ctx.context);
      return generateGantt({
        ...args,
        startDate: args.startDate ?? today(Date.now(), cal.timeZone).date,
        workdays: args.workdays ?? cal.workdays,
        locale: args.locale ?? cal.locale,
        holidays: args.holidays ?? cal.holidays,
        ...(args.assignees || team.length ? { assignees: args.assignees ?? team } : {}),
      });
    },
  });
