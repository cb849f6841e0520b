/**
 * LangChain's Agent Inbox as a client of the graph under LangGraph's server: it reads the
 * `HumanInterrupt` fields (`action_request`, `config`, `description`) of an interrupt's value and
 * answers with `HumanResponse`s (`[{ type: "accept" | "edit" | "ignore" | "response", args }]`).
 * The confirmation interrupt carries those fields for its first waiting step (Agent Inbox shows one
 * interrupt per thread) beside our own payload; the answers become our one decision shape
 * (src/kernel/decision.ts): accept = approve, edit = approve with the edited arguments, ignore =
 * leave it waiting. `response` (free text) is not a decision: allow_respond is false.
 *
 * Beside it, the newer HITL middleware format (langchain's `humanInTheLoopMiddleware`, which newer
 * Agent Inbox versions read): `actionRequests` (one per waiting step, in order) and `reviewConfigs`
 * (one per skill), answered by `{ decisions: [...] }` with one decision per action request, in
 * order: approve, edit (`editedAction.args`: approve with those arguments) or reject (`message`: the
 * comment). A list tells it apart from our own `{ decisions: { <stepId>: ... } }`. Pure.
 */
import type { Decision } from "../src/kernel/decision.js";
import type { PendingConfirmation } from "../src/kernel/pending.js";

type HitlDecisionType = "approve" | "edit" | "reject";

export interface HumanInterruptFields {
  action_request: { action: string; args: Record<string, unknown> };
  config: { allow_accept: boolean; allow_edit: boolean; allow_respond: boolean; allow_ignore: boolean };
  description: string;
  actionRequests: { name: string; args: Record<string, unknown>; description: string }[];
  reviewConfigs: { actionName: string; allowedDecisions: HitlDecisionType[] }[];
}

const allowedOf = (p: PendingConfirmation): HitlDecisionType[] =>
  (p.kind ?? "confirmation") === "confirmation" ? ["approve", "edit", "reject"] : ["approve", "reject"];

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The fields Agent Inbox reads, describing the first waiting step (undefined when none waits). */
export function humanInterrupt(
  runId: string,
  pending: readonly PendingConfirmation[],
): HumanInterruptFields | undefined {
  const p = pending[0];
  if (!p) return undefined;
  const kind = p.kind ?? "confirmation";
  const others = pending.length - 1;
  const what = describe(runId, p);
  // one review config per skill: what every waiting step of that skill allows
  const configs = new Map<string, HitlDecisionType[]>();
  for (const q of pending) {
    const seen = configs.get(q.skillName);
    configs.set(q.skillName, seen ? seen.filter((d) => allowedOf(q).includes(d)) : allowedOf(q));
  }
  return {
    action_request: { action: p.skillName, args: isObj(p.arguments) ? p.arguments : {} },
    config: { allow_accept: true, allow_edit: kind === "confirmation", allow_respond: false, allow_ignore: true },
    description: [
      what,
      p.preview !== null && p.preview !== undefined
        ? `\n\nPreview:\n\n\`\`\`json\n${JSON.stringify(p.preview, null, 2)}\n\`\`\``
        : "",
      others > 0
        ? `\n\n${others} more step${others === 1 ? "" : "s"} of this run wait${others === 1 ? "s" : ""}: each comes next.`
        : "",
    ].join(""),
    actionRequests: pending.map((q) => ({
      name: q.skillName,
      args: isObj(q.arguments) ? q.arguments : {},
      description: describe(runId, q, "hitl"),
    })),
    reviewConfigs: [...configs].map(([actionName, allowedDecisions]) => ({ actionName, allowedDecisions })),
  };
}

/** What a waiting step asks for, in the words of the format's answers (Agent Inbox's, or the HITL middleware's). */
function describe(runId: string, p: PendingConfirmation, format: "inbox" | "hitl" = "inbox"): string {
  const kind = p.kind ?? "confirmation";
  const inbox = format === "inbox";
  if (kind === "confirmation")
    return `Step \`${p.stepId}\` of run \`${runId}\` waits for confirmation before running \`${p.skillName}\`. ${
      inbox
        ? "Accept approves it; edit approves it with your arguments; ignore leaves it waiting."
        : "Approve runs it; edit runs it with your arguments; reject rejects it."
    }`;
  if (kind === "in_doubt")
    return `Step \`${p.stepId}\` of run \`${runId}\` is in doubt (its process died during the effect). ${
      inbox ? "Accept runs it again; ignore leaves it waiting." : "Approve runs it again; reject rejects it."
    }`;
  return `The compensation of step \`${p.stepId}\` of run \`${runId}\` failed. ${
    inbox ? "Accept retries it; ignore leaves it waiting." : "Approve retries it; reject stops the rollback."
  }`;
}

const TYPES = new Set(["accept", "edit", "ignore", "response"]);
const isHumanResponse = (v: unknown): v is { type: string; args?: unknown } =>
  isObj(v) &&
  typeof v.type === "string" &&
  TYPES.has(v.type) &&
  Object.keys(v).every((k) => k === "type" || k === "args");

export type FromInbox =
  | { kind: "decisions"; value: { decisions: Record<string, Decision> } }
  | { kind: "ignore" }
  | { kind: "invalid"; message: string };

/**
 * A resume value in Agent Inbox's shape (a HumanResponse, or a list of them: the first answers the
 * step the interrupt described), as our resume value; undefined when it is not in that shape.
 */
export function fromHumanResponse(raw: unknown, first: PendingConfirmation | undefined): FromInbox | undefined {
  const r =
    Array.isArray(raw) && raw.length > 0 && raw.every(isHumanResponse)
      ? raw[0]
      : isHumanResponse(raw)
        ? raw
        : undefined;
  if (!r) return undefined;
  if (r.type === "ignore") return { kind: "ignore" };
  if (!first) return { kind: "invalid", message: "nothing waits for a decision" };
  const round = first.round ?? 0;
  if (r.type === "accept")
    return {
      kind: "decisions",
      value: { decisions: { [first.stepId]: { decision: "approve", round, via: "studio" } } },
    };
  if (r.type === "edit") {
    if ((first.kind ?? "confirmation") !== "confirmation")
      return {
        kind: "invalid",
        message: `step "${first.stepId}" is not a confirmation: its arguments cannot be edited`,
      };
    const args = isObj(r.args) ? r.args.args : undefined;
    if (!isObj(args)) return { kind: "invalid", message: "edit: args.args must be the step's arguments (an object)" };
    return {
      kind: "decisions",
      value: { decisions: { [first.stepId]: { decision: "approve", arguments: args, round, via: "studio" } } },
    };
  }
  return {
    kind: "invalid",
    message: "response: a text answer is not a decision here (allow_respond is false); accept, edit or ignore",
  };
}

const HITL_TYPES = new Set<string>(["approve", "edit", "reject"]);

/**
 * A resume value in the HITL middleware's shape (`{ decisions: [...] }`, one per action request in
 * order), as our resume value; undefined when it is not in that shape (ours keys decisions by step).
 */
export function fromHitlResponse(raw: unknown, pending: readonly PendingConfirmation[]): FromInbox | undefined {
  if (!isObj(raw) || !Array.isArray(raw.decisions)) return undefined;
  const list: unknown[] = raw.decisions;
  if (list.length !== pending.length)
    return {
      kind: "invalid",
      message: `decisions: ${list.length} decision${list.length === 1 ? "" : "s"} for ${pending.length} action request${pending.length === 1 ? "" : "s"}; answer each, in order`,
    };
  const decisions: Record<string, Decision> = {};
  for (const [i, d] of list.entries()) {
    const p = pending[i]!;
    const at = `decisions[${i}]`;
    if (!isObj(d) || typeof d.type !== "string" || !HITL_TYPES.has(d.type))
      return { kind: "invalid", message: `${at}.type: expected approve, edit or reject` };
    const round = p.round ?? 0;
    if (d.type === "approve") decisions[p.stepId] = { decision: "approve", round, via: "studio" };
    else if (d.type === "reject") {
      if (d.message !== undefined && typeof d.message !== "string")
        return { kind: "invalid", message: `${at}.message: expected a string` };
      decisions[p.stepId] = { decision: "reject", round, via: "studio", ...(d.message ? { comment: d.message } : {}) };
    } else {
      if ((p.kind ?? "confirmation") !== "confirmation")
        return {
          kind: "invalid",
          message: `${at}: step "${p.stepId}" is not a confirmation: its arguments cannot be edited`,
        };
      const a = d.editedAction;
      if (!isObj(a) || !isObj(a.args))
        return { kind: "invalid", message: `${at}.editedAction.args: expected the step's arguments (an object)` };
      if (a.name !== undefined && a.name !== p.skillName)
        return {
          kind: "invalid",
          message: `${at}.editedAction.name: the step runs ${p.skillName}; it cannot be changed`,
        };
      decisions[p.stepId] = { decision: "approve", arguments: a.args, round, via: "studio" };
    }
  }
  return { kind: "decisions", value: { decisions } };
}

/** Either Agent Inbox format's answer (undefined: neither; it is read as our own resume value). */
export function fromAgentInbox(raw: unknown, pending: readonly PendingConfirmation[]): FromInbox | undefined {
  return fromHumanResponse(raw, pending[0]) ?? fromHitlResponse(raw, pending);
}
