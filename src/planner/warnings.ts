/**
 * Planning warnings: the clamp's (src/plan/clamp.ts) and the planner's own notes about a plan
 * (`request_part_dropped`: the fallback planner left out a part of the request it cannot do).
 * One list (PLAN_WARNING_CODES) reaches the API, the events and the run's planning record.
 */
export type { PlanWarning, PlanWarningCode } from "../plan/clamp.js";
export type PlannerNoteCode = "request_part_dropped";
