/**
 * Planning warnings: the clamp's (src/planner/clamp.ts) and the planner's own notes about a plan.
 * One list reaches the API, the events and the run's planning record.
 */
import type { PlanWarning as ClampWarning, PlanWarningCode as ClampWarningCode } from "./clamp.js";

/** Planner notes: `request_part_dropped`, the fallback planner left out a part of the request it cannot do. */
export type PlannerNoteCode = "request_part_dropped";
export type PlanWarningCode = ClampWarningCode | PlannerNoteCode;

export interface PlanWarning extends Omit<ClampWarning, "code"> {
  code: PlanWarningCode;
}
