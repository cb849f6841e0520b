/**
 * Event → status is declared once (src/kernel/projection.ts). Every place that folds events into a
 * status (the run store's projection, the live view of an active run, the CLI's run model and the
 * console's run page) must agree with it on any sequence of events: a surface that grows its own
 * mapping again fails here.
 */
import { describe, expect, it } from "vitest";
import { fc, test as prop } from "@fast-check/vitest";
import { applyLiveEvent } from "../console/src/model/live.js";
import { RunModel } from "../src/cli/model.js";
import { EventType, type RunEvent } from "../src/kernel/events.js";
import { foldRunStatus, STEP_STATUS_AFTER } from "../src/kernel/projection.js";
import type { RunStatus, StepStatus } from "../src/kernel/status.js";
import { LiveProjection } from "../src/runtime/live-projection.js";
import { project } from "../src/store/projection.js";

const TYPES = Object.values(EventType);
const STEPS = ["a", "b"];

function event(type: EventType, seq: number, stepId: string | undefined, status?: string): RunEvent {
  const data: Record<string, unknown> = { skillName: "core.pass", attempt: 1 };
  if (status) data.status = status;
  return {
    runId: "r1",
    seq,
    type,
    ...(stepId ? { stepId } : {}),
    at: new Date(1_700_000_000_000 + seq).toISOString(),
    data,
    key: `${type}:${seq}`,
  };
}

interface Seen {
  run: RunStatus | undefined;
  steps: Record<string, StepStatus | undefined>;
}

/** What each surface says after the same events. */
function surfaces(events: RunEvent[]): Record<"kernel" | "store" | "live" | "cli" | "console", Seen> {
  const store = project(events, []);
  const live = new LiveProjection();
  for (const e of events) live.apply(e);
  const cli = new RunModel("r1", "queued");
  cli.setPlan({ steps: STEPS.map((stepId) => ({ stepId, skillName: "core.pass" })) });
  for (const e of events) cli.apply(e);
  const consoleView = { status: "queued" as RunStatus };
  const consoleSteps = new Map<string, StepStatus>();
  for (const e of events) applyLiveEvent(consoleView, consoleSteps, e);
  const kernelSteps: Record<string, StepStatus | undefined> = {};
  for (const e of events) if (e.stepId && STEP_STATUS_AFTER[e.type]) kernelSteps[e.stepId] = STEP_STATUS_AFTER[e.type];
  const known = (get: (id: string) => StepStatus | undefined) => Object.fromEntries(STEPS.map((id) => [id, get(id)]));
  // "queued" is where the CLI and the console start; the store and the live view start from "no change"
  const orQueued = (s: RunStatus | undefined) => s ?? "queued";
  return {
    kernel: { run: orQueued(foldRunStatus(events, undefined)), steps: known((id) => kernelSteps[id]) },
    store: { run: orQueued(store.runStatus), steps: known((id) => store.steps.find((s) => s.stepId === id)?.status) },
    live: { run: orQueued(live.runStatus), steps: known((id) => live.status.get(id)) },
    cli: { run: cli.status, steps: known((id) => (kernelSteps[id] ? cli.steps.get(id)?.status : undefined)) },
    console: { run: consoleView.status, steps: known((id) => consoleSteps.get(id)) },
  };
}

describe("event → status: one projection", () => {
  it("planning_started means planning everywhere, planning_completed running", () => {
    const started = surfaces([event("planning_started", 1, undefined)]);
    for (const [name, s] of Object.entries(started)) expect([name, s.run]).toEqual([name, "planning"]);
    const planned = surfaces([event("planning_started", 1, undefined), event("planning_completed", 2, undefined)]);
    for (const [name, s] of Object.entries(planned)) expect([name, s.run]).toEqual([name, "running"]);
  });

  it("a wait, a decision and a terminal status with its own data.status", () => {
    const events = [
      event("planning_started", 1, undefined),
      event("planning_completed", 2, undefined),
      event("step_waiting_confirmation", 3, "a"),
      event("run_waiting_confirmation", 4, undefined),
    ];
    for (const s of Object.values(surfaces(events)))
      expect(s).toEqual({ run: "waiting_confirmation", steps: { a: "waiting_confirmation", b: undefined } });
    events.push(
      event("step_confirmed", 5, "a"),
      event("step_started", 6, "a"),
      event("step_failed", 7, "a"),
      event("run_failed", 8, undefined, "rolled_back"),
    );
    for (const s of Object.values(surfaces(events)))
      expect(s).toEqual({ run: "rolled_back", steps: { a: "failed", b: undefined } });
  });

  prop.prop([
    fc.array(
      fc.record({
        type: fc.constantFrom(...TYPES),
        step: fc.option(fc.constantFrom(...STEPS), { nil: undefined }),
        status: fc.option(fc.constantFrom("completed", "failed", "cancelled", "rolled_back"), { nil: undefined }),
      }),
      { maxLength: 30 },
    ),
  ])("every surface agrees with the kernel on any sequence of events", (list) => {
    const events = list.map((x, i) =>
      event(x.type, i + 1, x.type.startsWith("step_") ? (x.step ?? "a") : undefined, x.status),
    );
    const all = surfaces(events);
    for (const [name, s] of Object.entries(all)) expect([name, s]).toEqual([name, all.kernel]);
  });
});
