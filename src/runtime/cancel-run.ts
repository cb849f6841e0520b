/** Cancel: a durable request recorded on the run, applied by whichever process executes it. */
import { cancelError, ErrorCode, ToolchainError } from "../kernel/errors.js";
import { EventType } from "../kernel/events.js";
import { LIBRARY_ACTING, type Acting } from "../kernel/actor.js";
import { TERMINAL_RUN } from "../kernel/status.js";
import { assertStorable } from "../kernel/storable.js";
import type { RunHandle } from "./options.js";
import type { RuntimeCore } from "./core.js";

/**
 * Cancel: a durable request, like a decision. It is recorded on the run (the first reason wins),
 * then applied by whichever process executes the run: this one at once, another within its
 * decision poll, a queued run before any step starts. Running steps are aborted through their
 * signal, then completed steps are compensated. A run that can no longer change answers with its
 * current view.
 */
export async function cancelRun(
  core: RuntimeCore,
  runId: string,
  reason = "cancelled by request",
  acting: Acting = LIBRARY_ACTING,
): Promise<RunHandle> {
  if (typeof reason !== "string" || reason.length > 2_000)
    throw new ToolchainError(ErrorCode.INVALID_DECISION, "reason: a string of at most 2000 characters");
  assertStorable(reason, "reason");
  const row = await core.store.getRow(runId);
  if (!row) throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
  if (TERMINAL_RUN.has(row.status) && !row.pendingConfirmations.length) return core.follow(runId);
  // the event first, then the request a driver acts on: a run never ends cancelled before its
  // audit trail names who asked (a client following the run could otherwise read the log too early)
  const first = row.cancelRequest ? undefined : await recordCancelEvent(core, runId, reason, acting);
  await core.store.requestCancel(runId, first?.reason ?? reason, first?.acting ?? acting);
  const local = core.active.get(runId);
  if (local) {
    await local.ready;
    core.env.controls.cancel(runId, cancelError(row.cancelRequest?.reason ?? reason, row.cancelRequest ?? acting));
    return core.handleOf(local);
  }
  return core.continueRun(runId);
}

/**
 * The audit trail of a cancel: one `run_cancel_requested` event naming who asked. Racing cancels
 * append the same key and the first stored one wins; the row's request is then written from that
 * winner, so the event and the row always name the same principal and reason.
 */
async function recordCancelEvent(
  core: RuntimeCore,
  runId: string,
  reason: string,
  acting: Acting,
): Promise<{ reason: string; acting: Acting }> {
  const event = {
    type: EventType.run_cancel_requested,
    at: new Date(core.env.now()).toISOString(),
    data: { reason, by: acting.by, via: acting.via },
    key: "run_cancel_requested",
  };
  if ((await core.store.append(runId, [event])).length) return { reason, acting };
  const stored = (await core.store.list(runId)).find((e) => e.key === event.key)?.data as
    { reason: string; by: Acting["by"]; via: Acting["via"] } | undefined;
  return stored ? { reason: stored.reason, acting: { by: stored.by, via: stored.via } } : { reason, acting };
}
