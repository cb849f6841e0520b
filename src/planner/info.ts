/**
 * What a run records about its planning (types only): which planner wrote the plan and what the
 * model call cost. Apart from the planner itself so the run state and the wire types (the console
 * type-checks them) do not pull in the planner's model and telemetry code.
 */
import type { FallbackReason } from "./config.js";

export type PlannerKind = "llm" | "fallback";

/** Which planner wrote a plan, and why the fallback did when it did. */
export interface PlannerInfo {
  kind: PlannerKind;
  /** The configured model (also when it failed and the fallback wrote the plan). */
  model?: string;
  fallbackReason?: FallbackReason;
  /** What went wrong with the model, for people. */
  fallbackDetail?: string;
}

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
}
