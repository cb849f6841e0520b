/**
 * Human approval: one interrupt carrying every step that waits, answered by a resume value
 * `{ decisions: { [stepId]: { decision, arguments?, comment? } } }` for any subset of them
 * (see ../shared/NOTES.md §2: one interrupt per round, decisions wrapped in our own object).
 * Unanswered steps stay waiting; the scheduler runs the answered ones at once.
 */
import { interrupt, isGraphInterrupt, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { z } from "zod";
import { ErrorCode } from "../src/kernel/errors.js";
import { EventType } from "../src/kernel/events.js";
import { emitter } from "./emit.js";
import type { RuntimeEnv } from "./env.js";
import type { Decision, RunState, RunUpdate } from "./state.js";

export const DecisionSchema = z
  .object({
    decision: z.enum(["approve", "reject", "mark_done", "skip"]),
    arguments: z.record(z.string(), z.unknown()).optional(),
    output: z.unknown().optional(),
    comment: z.string().max(4_000).optional(),
    at: z.string().optional(),
    /** The wait answered (see PendingConfirmation.round); omitted = the wait pending now. */
    round: z.number().int().min(0).optional(),
  })
  .strict();

export const ResumeSchema = z.union([
  z.object({ decisions: z.record(z.string(), DecisionSchema) }).strict(),
  z.object({ cancel: z.literal(true), reason: z.string().optional() }).strict(),
]);
export type ResumeValue = z.infer<typeof ResumeSchema>;

export interface PendingConfirmation {
  stepId: string;
  skillName: string;
  arguments: unknown;
  preview: unknown;
  /** Which wait of this step (0: before its first attempt; n: in doubt after attempt n). */
  round?: number;
  /** The step was running when its process died and the runtime cannot tell if its effect happened. */
  inDoubt?: boolean;
  /** What is being decided. @default "confirmation" */
  kind?: "confirmation" | "in_doubt" | "compensation";
}

export interface ConfirmationInterrupt {
  type: "confirmation";
  runId: string;
  pending: PendingConfirmation[];
}

export function pendingConfirmations(state: Pick<RunState, "steps" | "plan"> & Partial<Pick<RunState, "rollbackBlocked">>): PendingConfirmation[] {
  const out: PendingConfirmation[] = [];
  for (const s of state.plan.steps) {
    const r = state.steps[s.stepId];
    if (r?.status === "waiting_confirmation") {
      out.push({ stepId: s.stepId, skillName: s.skillName, arguments: r.input ?? s.arguments, preview: r.preview ?? null, round: r.waitRound ?? 0, ...(r.inDoubt ? { inDoubt: true, kind: "in_doubt" as const } : { kind: "confirmation" as const }) });
    }
  }
  const b = state.rollbackBlocked;
  if (b) out.push(compensationPending(state.plan.steps.find((s) => s.stepId === b.stepId)!.skillName, b));
  return out;
}

export function compensationPending(skillName: string, b: { stepId: string; round: number; error: unknown }): PendingConfirmation {
  return {
    stepId: b.stepId,
    skillName,
    arguments: null,
    preview: { compensationFailed: true, error: b.error, options: { approve: "retry the compensation", skip: "leave this step undone and continue", reject: "stop the rollback" } },
    round: b.round,
    kind: "compensation",
  };
}

export function makeApprovalNode(env: RuntimeEnv) {
  return async function approval(state: RunState, config: LangGraphRunnableConfig): Promise<RunUpdate> {
    const pending = pendingConfirmations(state);
    const rounds = new Map(pending.map((p) => [p.stepId, p.round ?? 0]));
    // A decision answers one wait: the pending round of its step. One for another round (stale,
    // or for a wait that has not happened yet) is ignored; one naming no round answers the current.
    const answer = (id: string, d: Decision): Decision | undefined => {
      const round = rounds.get(id);
      if (round === undefined || (d.round !== undefined && d.round !== round)) return undefined;
      return { ...d, round };
    };
    // Decisions that reached this process after the scheduler exited and before this interrupt
    // (the inbox keeps them). They never wait for a resume; a resume value, if any, adds to them.
    const early: Record<string, Decision> = {};
    for (const [id, d] of env.controls.take(state.runId)) {
      const a = answer(id, d);
      if (a) early[id] = a;
    }
    const payload: ConfirmationInterrupt = { type: "confirmation", runId: state.runId, pending };
    let raw: unknown;
    try {
      raw = interrupt(payload);
    } catch (e) {
      if (!isGraphInterrupt(e)) throw e;
      if (Object.keys(early).length) return { decisions: early, status: "running" };
      // keyed by every (step, round) waiting: the same step waiting again in a later round (e.g.
      // in doubt after a crash) is a new event, a replay of this very wait is not
      const key = pending.map((p) => `${p.stepId}@${p.round ?? 0}`).join(",");
      emitter(config, env)(EventType.run_waiting_confirmation, undefined, { pending: pending.map((p) => p.stepId), rounds: Object.fromEntries(rounds) }, key);
      throw e;
    }
    const parsed = ResumeSchema.safeParse(raw);
    if (!parsed.success) return Object.keys(early).length ? { decisions: early, status: "running" } : { status: "waiting_confirmation" }; // the runtime validates first
    if ("cancel" in parsed.data) {
      return { halt: "cancelled", error: { code: ErrorCode.CANCELLED, message: parsed.data.reason ?? "run cancelled" }, status: "running" };
    }
    const decisions: Record<string, Decision> = { ...early };
    for (const [id, d] of Object.entries(parsed.data.decisions)) {
      const a = answer(id, d);
      if (a) decisions[id] = a;
    }
    return { decisions, status: "running" };
  };
}
