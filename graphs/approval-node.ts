/**
 * Human approval: one interrupt carrying every step that waits, answered by a resume value
 * `{ decisions: { [stepId]: { decision, arguments?, comment? } } }` for any subset of them
 * (measured on LangGraph 1.7.3: one interrupt per round; decisions wrapped in our own object, since
 * a resume map keyed like interrupt ids is read as a per-interrupt map).
 * Unanswered steps stay waiting; the scheduler runs the answered ones at once.
 */
import { interrupt, isGraphInterrupt, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { z } from "zod";
import { ErrorCode } from "../src/kernel/errors.js";
import { DecisionSchema } from "../src/kernel/decision.js";
import { compensationPending, type PendingConfirmation } from "../src/kernel/pending.js";
import { EventType } from "../src/kernel/events.js";
import { ActorSchema, ApprovalGivenSchema, ViaSchema } from "../src/kernel/actor.js";
import { emitter } from "./emit.js";
import type { RuntimeEnv } from "./env.js";
import type { Decision, RunState, RunUpdate } from "./state.js";

const DecisionsResumeSchema = z.object({ decisions: z.record(z.string(), DecisionSchema) }).strict();
const CancelResumeSchema = z.object({ cancel: z.literal(true), reason: z.string().optional() }).strict();
export const ResumeSchema = z.union([DecisionsResumeSchema, CancelResumeSchema]);

/** The resume value parsed against the branch it claims to be, so an error names the field. */
export function parseResume(raw: unknown) {
  const claims = raw && typeof raw === "object" && !Array.isArray(raw) ? (raw as Record<string, unknown>) : undefined;
  if (claims && "decisions" in claims) return DecisionsResumeSchema.safeParse(raw);
  if (claims && "cancel" in claims) return CancelResumeSchema.safeParse(raw);
  return ResumeSchema.safeParse(raw);
}
export { compensationPending, type PendingConfirmation };
export type ResumeValue = z.infer<typeof ResumeSchema>;


export interface ConfirmationInterrupt {
  type: "confirmation";
  runId: string;
  pending: PendingConfirmation[];
  /** The resume value this interrupt expects, with an example for the first waiting step. */
  resume: { shape: string; example: unknown };
  /** Why the previous resume value was refused (nothing of it was applied). */
  resumeError?: { code: string; message: string };
}

export const RESUME_SHAPE =
  "{ decisions: { <stepId>: { decision: 'approve' | 'reject' (in doubt: 'mark_done' with output; failed compensation: 'skip'), arguments?, comment?, round? } } } " +
  "for any subset of the waiting steps, or { cancel: true, reason? }";

type Checked = { ok: true; value: ResumeValue; decisions: Record<string, Decision> } | { ok: false; error: { code: string; message: string } };

/**
 * A resume value against what waits. Nothing of a refused value applies: a malformed value, a
 * step that is not in the plan, or decisions none of which answers a waiting step's round.
 * Decisions for steps of the plan that no longer wait are stale (e.g. a repeat): ignored when
 * others apply.
 */
function checkResume(raw: unknown, stepIds: ReadonlySet<string>, answer: (id: string, d: Decision) => Decision | undefined): Checked {
  const parsed = parseResume(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? issue.path.join(".") : "resume";
    return { ok: false, error: { code: ErrorCode.INVALID_DECISION, message: `${where}: ${issue?.message ?? "invalid"}; expected ${RESUME_SHAPE}` } };
  }
  if ("cancel" in parsed.data) return { ok: true, value: parsed.data, decisions: {} };
  const unknown = Object.keys(parsed.data.decisions).filter((id) => !stepIds.has(id));
  if (unknown.length) return { ok: false, error: { code: ErrorCode.INVALID_DECISION, message: `decisions.${unknown[0]}: no step "${unknown[0]}" in this plan` } };
  const decisions: Record<string, Decision> = {};
  for (const [id, d] of Object.entries(parsed.data.decisions)) {
    const a = answer(id, d);
    if (a) decisions[id] = a;
  }
  if (!Object.keys(decisions).length) {
    const ids = Object.keys(parsed.data.decisions);
    return { ok: false, error: { code: ErrorCode.CONFIRMATION_NOT_PENDING, message: ids.length ? `decisions: step "${ids[0]}" is not waiting for this decision (or it names another round)` : "decisions: empty; answer at least one waiting step" } };
  }
  return { ok: true, value: parsed.data, decisions };
}

export function pendingConfirmations(state: Pick<RunState, "steps" | "plan"> & Partial<Pick<RunState, "rollbackBlocked">>): PendingConfirmation[] {
  const out: PendingConfirmation[] = [];
  for (const s of state.plan.steps) {
    const r = state.steps[s.stepId];
    if (r?.status === "waiting_confirmation") {
      // waiting to run its fallback skill: the decision is about that skill and its arguments
      const fb = !r.inDoubt && r.fallbackOf && s.fallback && "skillName" in s.fallback ? s.fallback : undefined;
      out.push({
        stepId: s.stepId,
        skillName: fb ? fb.skillName : s.skillName,
        arguments: fb ? r.fallbackInput ?? fb.arguments ?? {} : r.input ?? s.arguments,
        preview: r.preview ?? null,
        round: r.waitRound ?? 0,
        ...(r.inDoubt ? { inDoubt: true, kind: "in_doubt" as const } : { kind: "confirmation" as const }),
        ...(fb ? { fallback: true } : {}),
      });
    }
  }
  const b = state.rollbackBlocked;
  if (b) out.push(compensationPending(state.plan.steps.find((s) => s.stepId === b.stepId)!.skillName, b));
  return out;
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
    const first = pending[0];
    const payload: ConfirmationInterrupt = {
      type: "confirmation",
      runId: state.runId,
      pending,
      resume: { shape: RESUME_SHAPE, example: first ? { decisions: { [first.stepId]: { decision: "approve", comment: "looks right" } } } : { decisions: {} } },
    };
    const emit = emitter(config, env);
    // keyed by every (step, round) waiting: the same step waiting again in a later round (e.g.
    // in doubt after a crash) is a new event, a replay of this very wait is not
    const waitKey = pending.map((p) => `${p.stepId}@${p.round ?? 0}`).join(",");
    const stepIds = new Set(state.plan.steps.map((s) => s.stepId));
    // Each refused resume value raises the interrupt again (the next interrupt of this node), so
    // a replay of the node walks the same values to the same outcome.
    let resumeError: ConfirmationInterrupt["resumeError"];
    for (let i = 0; ; i++) {
      let raw: unknown;
      try {
        raw = interrupt(resumeError ? { ...payload, resumeError } : payload);
      } catch (e) {
        if (!isGraphInterrupt(e)) throw e;
        if (Object.keys(early).length) return { decisions: early, status: "running" };
        if (!resumeError) emit(EventType.run_waiting_confirmation, undefined, { pending: pending.map((p) => p.stepId), rounds: Object.fromEntries(rounds) }, waitKey);
        throw e;
      }
      const checked = checkResume(raw, stepIds, answer);
      if (!checked.ok) {
        resumeError = checked.error;
        emit(EventType.resume_rejected, undefined, { ...checked.error }, `${waitKey}#${i}`);
        continue;
      }
      if ("cancel" in checked.value) {
        return { halt: "cancelled", error: { code: ErrorCode.CANCELLED, message: checked.value.reason ?? "run cancelled" }, status: "running" };
      }
      const decisions: Record<string, Decision> = { ...early, ...checked.decisions };
      return { decisions, status: "running" };
    }
  };
}
