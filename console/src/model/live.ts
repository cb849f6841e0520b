/**
 * What the console's run page shows between two fetches of the run view: the view's run status and
 * step statuses moved forward by each event from the stream, through the kernel's projection
 * (src/kernel/projection.ts), the same one the server stores.
 */
import { runStatusAfter, STEP_STATUS_AFTER, stepsResetBy } from "../../../src/kernel/projection.js";
import type { StepStatus } from "../../../src/kernel/status.js";
import type { RunEvent, RunView } from "./types.js";

export function applyLiveEvent(
  view: Pick<RunView, "status"> | undefined,
  stepStatus: Map<string, StepStatus>,
  e: Pick<RunEvent, "type" | "stepId" | "data">,
): void {
  const st = STEP_STATUS_AFTER[e.type];
  if (e.stepId && st) stepStatus.set(e.stepId, st);
  for (const id of stepsResetBy(e)) stepStatus.set(id, "pending");
  if (view) view.status = runStatusAfter(e, view.status) ?? view.status;
}
