/** What a run looks like now: its view (live while it executes here) and the skill-version gate before a drive. */
import type { RunState } from "../kernel/run-state.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { EventType } from "../kernel/events.js";
import { TERMINAL_RUN } from "../kernel/status.js";
import { type VersionGate } from "./driver.js";
import { buildRunView, type RunView } from "../kernel/run-view.js";
import { eventKey } from "../kernel/events.js";
import { firstGap } from "../skills/version.js";
import type { RuntimeCore } from "./core.js";
import { withVersionChanges } from "./version-changes.js";

/**
 * The run view and whether the run has started: `started` is false while nothing but its
 * record (or the graph input) is stored, and the view is then built from the store alone.
 */
export async function inspectRun(core: RuntimeCore, runId: string): Promise<{ view: RunView; started: boolean }> {
  if (runId.includes("\u0000")) throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, "run not found");
  const snap = await core.stateOf(runId);
  const values = snap.values as Partial<RunState>;
  // only the graph input is checkpointed (runId, plan; createdAt and the rest are written by the
  // node that accepts the plan, planner or scheduler): not started yet, like a run with no
  // checkpoint (the soak hit this window), or failed before its first node's checkpoint
  if (!values?.runId || values.createdAt === undefined) {
    // a run given its plan executes in its first superstep, before any node's checkpoint: while
    // it runs here, the live projection moves the stored view forward as in any later superstep
    const local = values?.runId ? core.active.get(runId) : undefined;
    const stored = await core.store.getView(runId);
    if (stored) return { view: local ? local.live.overlay(stored) : stored, started: false };
    const row = await core.store.getRow(runId);
    if (!row) throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
    // recorded, not started yet
    const at = row.createdAt;
    const view = buildRunView({
      runId,
      plan: row.plan,
      context: row.context,
      memory: row.memory,
      steps: {},
      status: row.status,
      // a drive that failed for good before any node's checkpoint recorded why on the row
      error: row.error,
      createdAt: at,
      updatedAt: at,
    } as unknown as RunState);
    return { view: local ? local.live.overlay(view) : view, started: false };
  }
  return { view: await liveView(core, runId, values as RunState), started: true };
}

/**
 * The skill versions the run is pinned to, against this process's (called by a drive holding the
 * lease): undefined when it may drive the run; `leave` while a version is missing here and the
 * grace period, counted from the first process that found it missing (its
 * `run_waiting_for_version` event), runs; `unavailable` after it.
 */
export async function versionGate(core: RuntimeCore, runId: string): Promise<VersionGate | undefined> {
  const state = (await core.stateOf(runId)).values as Partial<RunState>;
  if (!state?.skillVersions || !state.status || TERMINAL_RUN.has(state.status)) return undefined;
  const gap = firstGap(state.skillVersions, (n) => core.registry.get(n));
  if (!gap) return undefined;
  const key = eventKey(EventType.run_waiting_for_version, undefined, `${gap.skill}@${gap.pinned.hash}`, 0);
  let since = (await core.store.list(runId, 0)).find((e) => e.key === key)?.at;
  if (!since) {
    since = new Date(core.env.now()).toISOString();
    await core.store.append(
      runId,
      [{ type: EventType.run_waiting_for_version, at: since, data: { skillVersion: gap }, key }],
      core.owner,
    );
  }
  return Date.parse(since) + core.versionGraceMs <= core.env.now() ? { unavailable: gap } : { leave: gap };
}

/** A started run's view: its checkpoint, moved forward by the live projection when it executes here. */
async function liveView(core: RuntimeCore, runId: string, values: RunState): Promise<RunView> {
  const view = buildRunView(values);
  if (!TERMINAL_RUN.has(view.status)) {
    const gap = firstGap(values.skillVersions, (n) => core.registry.get(n));
    if (gap) view.waitingFor = { skillVersion: gap };
  }
  const local = core.active.get(runId);
  if (!local) {
    if (!TERMINAL_RUN.has(view.status) || view.pendingConfirmations.length) {
      // a run whose drive failed for good is failed whatever its last checkpoint says
      const row = await core.store.getRow(runId);
      if (row?.error?.code === ErrorCode.DRIVE_FAILED && row.status === "failed") {
        return { ...view, status: "failed", error: row.error, pendingConfirmations: [] };
      }
    }
    return withVersionChanges(core, values, view);
  }
  return withVersionChanges(core, values, local.live.overlay(view));
}
