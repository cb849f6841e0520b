/**
 * The plan parsed against its schema, one step at a time (the generator yields after each step, so
 * a large plan does not hold the event loop); every schema issue named by its path, in field order.
 */
import { z } from "zod";
import { ErrorCode } from "../kernel/errors.js";
import { PlanValidationError } from "./plan-issues.js";
import { ToolChainPlanSchema, ToolChainStepSchema, type ToolChainPlan, type ToolChainStep } from "./schema.js";

/** Parsed without the steps, which are parsed one at a time (each yields). */
const PlanShellSchema = ToolChainPlanSchema.extend({ steps: z.array(z.unknown()).min(1) });
const SHAPE_ORDER = Object.keys(ToolChainPlanSchema.shape);

export function* parsePlan(input: unknown): Generator<void, ToolChainPlan> {
  const shell = PlanShellSchema.safeParse(input);
  const raw = (input as { steps?: unknown } | null)?.steps;
  const before: z.core.$ZodIssue[] = [];
  const after: z.core.$ZodIssue[] = [];
  if (!shell.success) {
    for (const i of shell.error.issues) {
      const k = SHAPE_ORDER.indexOf(String(i.path[0]));
      (k >= 0 && k < SHAPE_ORDER.indexOf("steps") ? before : after).push(i);
    }
  }
  const stepIssues: z.core.$ZodIssue[] = [];
  const steps: ToolChainStep[] = [];
  if (Array.isArray(raw)) {
    for (let i = 0; i < raw.length; i++) {
      const r = ToolChainStepSchema.safeParse(raw[i]);
      if (r.success) steps.push(r.data);
      else for (const issue of r.error.issues) stepIssues.push({ ...issue, path: ["steps", i, ...issue.path] });
      yield;
    }
  }
  const issues = [...before, ...stepIssues, ...after];
  if (issues.length || !shell.success) {
    throw new PlanValidationError(
      issues.map((i) => ({
        code: ErrorCode.PLAN_INVALID,
        message: `plan.${i.path.join(".")}: ${i.message}`,
        path: i.path.join("."),
      })),
    );
  }
  return { ...shell.data, steps };
}
