/** The one decision path of the runtime: a person's (or the expiry's) decision checked, voted and recorded, then handed to the drive. */
import type { RunState } from "../kernel/run-state.js";
import type { ConfirmInput } from "../kernel/decision.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { type Decider } from "../kernel/actor.js";
import { castVote } from "./approvals.js";
import { sameDecision } from "../store/run-store.js";
import { checkDecision, parseDecision } from "./admit-decision.js";
import type { RunHandle } from "./options.js";
import type { RuntimeCore } from "./core.js";

/**
 * The one decision path: `principal` decisions meet the step's approval policy (who, quorum);
 * an `expiry` reject is the runtime's own, recorded as the expiry principal (src/runtime/expiry.ts).
 */
export async function decide(
  core: RuntimeCore,
  runId: string,
  input: ConfirmInput,
  acting: Decider,
  source: "principal" | "expiry",
): Promise<RunHandle> {
  const { input: d, decision } = parseDecision(input);
  const row = await core.store.getRow(runId);
  if (!row) throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
  const local = core.active.get(runId);
  await local?.ready;
  const pending = local
    ? local.live.pending.get(d.stepId)
    : row.pendingConfirmations.find((p) => p.stepId === d.stepId);
  if (!pending) {
    // (checkpoints pruned by retention: the decision table still knows a round-0 decision)
    const prevRound = d.round ?? (await lastRound(core, runId, d.stepId)) ?? 0;
    const prev = await core.store.getDecision(runId, d.stepId, prevRound);
    if (prev && sameDecision(prev, decision)) return core.follow(runId);
    throw new ToolchainError(
      ErrorCode.CONFIRMATION_NOT_PENDING,
      `step "${d.stepId}" of run ${runId} is not waiting for confirmation`,
    );
  }
  checkDecision(runId, d, pending, row.plan, core.registry);
  decision.at = new Date(core.env.now()).toISOString();
  decision.round = pending.round ?? 0;
  decision.by = acting.by;
  decision.via = acting.via;
  if (source === "principal") {
    // the step's approval policy: who may decide, and how many must approve (src/runtime/approvals.ts)
    const policy = core.policyOf(row, { ...pending, stepId: d.stepId });
    const vote = await castVote(core.store, runId, d.stepId, decision, policy, acting, row.admission?.requestedBy);
    if ("counted" in vote) return core.follow(runId); // the quorum is not complete: the step keeps waiting
    Object.assign(decision, vote.proceed);
  }
  const recorded = await core.store.recordDecision(runId, d.stepId, decision.round, decision);
  if (recorded === "duplicate") return core.follow(runId);
  // two last approvals of a quorum racing: the quorum is complete either way
  if (
    recorded === "conflict" &&
    decision.approvals &&
    (await core.store.getDecision(runId, d.stepId, decision.round))?.decision === "approve"
  )
    return core.follow(runId);
  if (recorded === "conflict")
    throw new ToolchainError(
      ErrorCode.CONFIRMATION_NOT_PENDING,
      `step "${d.stepId}" of run ${runId} already has a different decision`,
    );
  if (local) {
    // the scheduler is running here, maybe busy on other branches: hand it the decision now
    local.live.pending.delete(d.stepId);
    local.live.decided.set(d.stepId, decision);
    core.env.controls.offer(runId, d.stepId, decision);
    return core.handleOf(local);
  }
  return core.continueRun(runId);
}

async function lastRound(core: RuntimeCore, runId: string, stepId: string): Promise<number | undefined> {
  const snap = await core.stateOf(runId);
  const rec = (snap.values as Partial<RunState>).steps?.[stepId];
  return rec ? (rec.waitRound ?? 0) : undefined;
}
