/** A small plan that shows the runtime's semantics with built-in skills only. */
import type { ToolChainPlanInput } from "../plan/schema.js";

export const demoPlan: ToolChainPlanInput = {
  planId: "demo",
  goal: "Show parallel branches, references, a retried step and successor release",
  maxConcurrency: 4,
  steps: [
    { stepId: "split", skillName: "core.pass", arguments: { value: { tasks: ["design", "build", "test"] } }, saveResultAs: "tasks" },
    { stepId: "estimate", skillName: "core.wait", dependsOn: ["split"], arguments: { ms: 300, value: { days: 12 } } },
    { stepId: "flaky", skillName: "core.fail", dependsOn: ["split"], arguments: { code: "TRANSIENT", untilAttempt: 2, value: "recovered" }, retry: { maxAttempts: 3, backoff: { kind: "exponential", initialMs: 50 } } },
    { stepId: "timeline", skillName: "core.pass", dependsOn: ["flaky"], arguments: { value: { first: { $ref: "memory.tasks.tasks.0" }, note: { $ref: "steps.flaky" } } } },
    { stepId: "report", skillName: "core.pass", dependsOn: ["estimate", "timeline"], arguments: { value: { days: { $ref: "steps.estimate.days" }, first: { $ref: "steps.timeline.first" }, table: { $ref: "context.table" } } } },
  ],
};
