/** Zod shapes shared by the QTable skills (their inputs chain into each other through `$ref`s). */
import { z } from "zod";
import { FieldSchema } from "./fields.js";

export const TaskKeySchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, "task keys are letters, digits, _ . -");

export const TaskSchema = z.object({
  key: TaskKeySchema,
  title: z.string().min(1).max(500),
  description: z.string().max(10_000).default(""),
  dependsOn: z.array(TaskKeySchema).max(100).default([]),
  assignee: z
    .string()
    .min(1)
    .max(320)
    .optional()
    .describe("Who does it (a user id or e-mail); the Gantt never books one person on two tasks at once"),
  phase: z
    .object({ key: TaskKeySchema, title: z.string().min(1).max(500) })
    .strict()
    .optional()
    .describe("The phase the task belongs to (its key is no task's): written as the task's parent row"),
});
export type Task = z.infer<typeof TaskSchema>;

export const EstimateSchema = z.object({
  key: TaskKeySchema,
  days: z.number().positive().max(10_000),
  confidence: z.number().min(0).max(1).optional(),
});

const IsoDate = z.string().regex(/^\d{4}-\d{2}-\d{2}$/, "dates are YYYY-MM-DD");

export const GanttItemSchema = z.object({
  key: TaskKeySchema,
  start: IsoDate,
  end: IsoDate,
  startsAtMidday: z.literal(true).optional(),
  endsAtMidday: z.literal(true).optional(),
  days: z.number().multipleOf(0.5).min(0).optional(),
  slack: z.number().multipleOf(0.5).min(0).optional(),
  milestone: z.boolean().optional(),
  assignee: z.string().optional(),
  waitsFor: TaskKeySchema.optional(),
});

export const GanttSchema = z.object({
  items: z.array(GanttItemSchema),
  criticalPath: z.array(TaskKeySchema),
  criticalPaths: z.array(z.array(TaskKeySchema)).optional(),
  finish: IsoDate,
  calendar: z
    .object({ workdays: z.array(z.number().int()), locale: z.string(), holidays: z.array(IsoDate) })
    .optional(),
});

export const TableIdSchema = z
  .string()
  .min(1)
  .max(100)
  .describe("The table's id (tbl_…) or its exact name in the workspace");

export const TableSchemaOutput = z.object({ id: z.string(), name: z.string(), fields: z.array(FieldSchema) });

export const IsoDateSchema = IsoDate;
