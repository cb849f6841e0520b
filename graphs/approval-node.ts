/**
 * Human approval: one interrupt carrying every step that waits, answered by a resume value
 * `{ decisions: { [stepId]: { decision, arguments?, comment? } } }` for any subset of them
 * (measured on LangGraph 1.7.3: one interrupt per round; decisions wrapped in our own object, since
 * a resume map keyed like interrupt ids is read as a per-interrupt map).
 * Unanswered steps stay waiting; the scheduler runs the answered ones at once.
 */
import { interrupt, isGraphInterrupt, type LangGraphRunnableConfig } from "@langchain/langgraph";
import { cancelError, ErrorCode, toStepError } from "../src/kernel/errors.js";
import { compensationPending, pendingConfirmations, type PendingConfirmation } from "../src/kernel/pending.js";
import { parseResume, ResumeSchema, type ResumeValue } from "../src/kernel/resume.js";
import { EventType } from "../src/kernel/events.js";
import { checkEditedArguments } from "../src/skills/edited-arguments.js";
import { fromAgentInbox, humanInterrupt, type HumanInterruptFields } from "./agent-inbox.js";
import { emitter } from "./emit.js";
import type { RuntimeEnv } from "./env.js";
import type { Decision, RunState, RunUpdate } from "./state.js";

export {
  compensationPending,
  pendingConfirmations,
  parseResume,
  ResumeSchema,
  type PendingConfirmation,
  type ResumeValue,
};

/** Our payload, and (for Agent Inbox, graphs/agent-inbox.ts) the HumanInterrupt fields of its first waiting step. */
export interface ConfirmationInterrupt extends Partial<HumanInterruptFields> {
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

type Checked =
  | { ok: true; value: ResumeValue; decisions: Record<string, Decision> }
  | { ok: false; error: { code: string; message: string } };

/**
 * A resume value against what waits. Nothing of a refused value applies: a malformed value, a
 * step that is not in the plan, or decisions none of which answers a waiting step's round.
 * Decisions for steps of the plan that no longer wait are stale (e.g. a repeat): ignored when
 * others apply.
 */
function checkResume(
  raw: unknown,
  stepIds: ReadonlySet<string>,
  answer: (id: string, d: Decision) => Decision | undefined,
): Checked {
  const parsed = parseResume(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? issue.path.join(".") : "resume";
    return {
      ok: false,
      error: {
        code: ErrorCode.INVALID_DECISION,
        message: `${where}: ${issue?.message ?? "invalid"}; expected ${RESUME_SHAPE}`,
      },
    };
  }
  if ("cancel" in parsed.data) return { ok: true, value: parsed.data, decisions: {} };
  const unknown = Object.keys(parsed.data.decisions).filter((id) => !stepIds.has(id));
  if (unknown.length)
    return {
      ok: false,
      error: {
        code: ErrorCode.INVALID_DECISION,
        message: `decisions.${unknown[0]}: no step "${unknown[0]}" in this plan`,
      },
    };
  const decisions: Record<string, Decision> = {};
  for (const [id, d] of Object.entries(parsed.data.decisions)) {
    const a = answer(id, d);
    if (a) decisions[id] = a;
  }
  if (!Object.keys(decisions).length) {
    const ids = Object.keys(parsed.data.decisions);
    return {
      ok: false,
      error: {
        code: ErrorCode.CONFIRMATION_NOT_PENDING,
        message: ids.length
          ? `decisions: step "${ids[0]}" is not waiting for this decision (or it names another round)`
          : "decisions: empty; answer at least one waiting step",
      },
    };
  }
  return { ok: true, value: parsed.data, decisions };
}

/** Edited arguments are checked as every decision's are (the skill's input schema, src/skills/edited-arguments.ts). */
function admitted(c: Checked, state: RunState, pending: readonly PendingConfirmation[], env: RuntimeEnv): Checked {
  if (!c.ok) return c;
  for (const [id, d] of Object.entries(c.decisions)) {
    const p = pending.find((x) => x.stepId === id);
    if (!p || d.decision !== "approve" || !d.arguments) continue;
    try {
      checkEditedArguments(id, d.arguments, p, state.plan, env.registry);
    } catch (e) {
      const err = e as { code?: string; message?: string };
      return {
        ok: false,
        error: { code: err.code ?? ErrorCode.INVALID_DECISION, message: `decisions.${id}: ${err.message}` },
      };
    }
  }
  return c;
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
      ...humanInterrupt(state.runId, pending),
      resume: {
        shape: RESUME_SHAPE,
        example: first
          ? { decisions: { [first.stepId]: { decision: "approve", comment: "looks right" } } }
          : { decisions: {} },
      },
    };
    const emit = emitter(config, env, state);
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
        if (!resumeError)
          emit(
            EventType.run_waiting_confirmation,
            undefined,
            { pending: pending.map((p) => p.stepId), rounds: Object.fromEntries(rounds) },
            waitKey,
          );
        throw e;
      }
      // Agent Inbox's answers: ignore leaves every step waiting (the interrupt is raised again)
      const inbox = fromAgentInbox(raw, pending);
      if (inbox?.kind === "ignore") continue;
      const checked: Checked =
        inbox?.kind === "invalid"
          ? { ok: false, error: { code: ErrorCode.INVALID_DECISION, message: inbox.message } }
          : admitted(checkResume(inbox ? inbox.value : raw, stepIds, answer), state, pending, env);
      if (!checked.ok) {
        resumeError = checked.error;
        emit(EventType.resume_rejected, undefined, { ...checked.error }, `${waitKey}#${i}`);
        continue;
      }
      if ("cancel" in checked.value) {
        const { reason, by, via } = checked.value;
        return {
          halt: "cancelled",
          error: toStepError(cancelError(reason ?? "run cancelled", { by, via })),
          status: "running",
        };
      }
      // the runtime's resume values carry each decision's principal; one without came straight to the
      // graph (LangGraph Studio, the LangGraph SDK): recorded as such
      const fromGraph = Object.fromEntries(
        Object.entries(checked.decisions).map(([id, d]) => [id, d.via ? d : { ...d, via: "studio" as const }]),
      );
      const decisions: Record<string, Decision> = { ...early, ...fromGraph };
      return { decisions, status: "running" };
    }
  };
}
