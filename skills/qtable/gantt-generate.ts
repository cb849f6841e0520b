/** qtable.gantt.generate: tasks + estimates → dated items on a working-day calendar (pure). */
import { z } from "zod";
import { defineSkill } from "../../src/skills/contract.js";
import { generateGantt } from "./gantt.js";
import { EstimateSchema, GanttSchema, IsoDateSchema, TaskSchema } from "./schemas.js";

export const GanttInputSchema = z
  .object({
    tasks: z.array(TaskSchema).min(1).max(1_000),
    estimates: z.array(EstimateSchema).min(1).max(1_000),
    startDate: IsoDateSchema.describe("The first day work may start (YYYY-MM-DD)"),
    workdays: z.array(z.number().int().min(1).max(7)).min(1).max(7).optional().describe("ISO weekday numbers, 1 = Monday … 7 = Sunday; default Monday–Friday"),
    holidays: z.array(IsoDateSchema).max(1_000).optional().describe("Dates that are not worked"),
  })
  .strict();

export const ganttGenerateSkill = defineSkill({
  name: "qtable.gantt.generate",
  description:
    "Schedule tasks on working days: each starts on the first working day after its last dependency ends; `end` is inclusive; fractional days book whole days; weekends (per `workdays`) and `holidays` are skipped. Returns items, the zero-slack critical path and the finish date. Cyclic or dangling dependencies fail with INVALID_INPUT naming them.",
  input: GanttInputSchema,
  output: GanttSchema,
  sideEffects: "none",
  idempotent: true,
  estimateDurationMs: () => 1,
  async execute(args) {
    return generateGantt(args);
  },
});
