// the clamp is plan admission (src/plan/clamp.ts): the planner and the runtime apply the same code
export { clampPlan, type PlanWarning, type PlanWarningCode } from "../plan/clamp.js";
