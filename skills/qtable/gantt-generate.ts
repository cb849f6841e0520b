/** qtable.gantt.generate: tasks + estimates → dated items on a working-day calendar (pure). */
import { z } from "zod";
import { defineSkill } from "../../src/skills/contract.js";
import { generateGantt } from "./gantt.js";
import { HOLIDAY_LOCALES } from "./holidays.js";
import { EstimateSchema, GanttSchema, IsoDateSchema, TaskKeySchema, TaskSchema } from "./schemas.js";

export const GanttLinkSchema = z
  .object({
    from: TaskKeySchema.describe("The predecessor's key"),
    to: TaskKeySchema.describe("The successor's key"),
    type: z.enum(["FS", "SS", "FF"]).describe("FS: to starts after from finishes; SS: to starts after from starts; FF: to finishes after from finishes"),
    lag: z.number().int().min(-365).max(365).optional().describe("Working days after (negative: before) the predecessor's start/finish; default 0"),
  })
  .strict();

export const GanttInputSchema = z
  .object({
    tasks: z.array(TaskSchema).min(1).max(1_000),
    estimates: z.array(EstimateSchema).max(1_000),
    startDate: IsoDateSchema.describe("The first day work may start (YYYY-MM-DD)"),
    workdays: z.array(z.number().int().min(1).max(7)).min(1).max(7).optional().describe("ISO weekday numbers, 1 = Monday … 7 = Sunday; default Monday–Friday"),
    locale: z.enum(HOLIDAY_LOCALES).optional().describe("Built-in public holidays: intl (New Year's Day, Christmas Day), US, GB, DE, FR, NL, CA, AU, or none; default TOOLCHAIN_HOLIDAY_LOCALE, else intl"),
    holidays: z.array(IsoDateSchema).max(1_000).optional().describe("The team's own days off, in addition to the locale's"),
    links: z.array(GanttLinkSchema).max(2_000).optional().describe("Dependencies beyond dependsOn (finish-to-start): SS / FF / FS with a lag; a link replaces the dependsOn entry for the same pair"),
    milestones: z.array(TaskKeySchema).max(1_000).optional().describe("Keys of tasks with no duration (they need no estimate)"),
  })
  .strict();

export const ganttGenerateSkill = defineSkill({
  name: "qtable.gantt.generate",
  description:
    "Schedule tasks on working days (critical-path method): dependsOn are finish-to-start, `links` add start-to-start / finish-to-finish / finish-to-start with a lag; `end` is inclusive; fractional days book whole days; weekends (per `workdays`), the built-in public holidays of `locale` (default: New Year's Day and Christmas Day) and the team's `holidays` are skipped; `milestones` take no time. Returns items with slack, every tied critical chain (criticalPaths; criticalPath is the first) and the finish date. Cyclic or dangling dependencies and duplicate estimates fail with INVALID_INPUT naming them.",
  input: GanttInputSchema,
  output: GanttSchema,
  sideEffects: "none",
  idempotent: true,
  estimateDurationMs: () => 1,
  async execute(args) {
    return generateGantt(args);
  },
});
