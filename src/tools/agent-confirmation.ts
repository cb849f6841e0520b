/**
 * Pure: how a chain's confirmation looks to a chat agent running in a LangGraph graph (the payload
 * of the agent's `interrupt()`), and how the value it is resumed with is read. No LangGraph or
 * runtime imports: src/tools/langchain.ts raises the interrupt and applies the decisions.
 */
import { z } from "zod";
import { DecisionSchema } from "../kernel/decision.js";
import { ErrorCode } from "../kernel/errors.js";
import type { PendingStep, ToolChainRunResult } from "./definitions.js";
import { versionChangeLines } from "../kernel/version-notice.js";
import { brief } from "./results.js";

type Kind = NonNullable<PendingStep["kind"]>;

/** The decisions each kind of wait takes (the runtime refuses the others with INVALID_DECISION). */
export const DECISIONS_BY_KIND: Record<Kind, readonly ToolChainDecision["decision"][]> = {
  confirmation: ["approve", "reject"],
  in_doubt: ["approve", "reject", "mark_done"],
  compensation: ["approve", "reject", "skip"],
};

/** A waiting step as the agent sees it: what `toRunResult` shows plus the wait's round. */
export type AgentPendingStep = PendingStep & { round: number };

/** A run result whose pending steps carry their round (what the tools answer with). */
export type AgentRunResult = Omit<ToolChainRunResult, "pending"> & { pending: AgentPendingStep[] };

/** A decision as a chat agent resumes with it (the kernel's shape; the runtime stamps `at` and the round). */
export const ToolChainDecisionSchema = DecisionSchema.pick({
  decision: true,
  arguments: true,
  output: true,
  comment: true,
});
export type ToolChainDecision = z.infer<typeof ToolChainDecisionSchema>;

/** What the agent is resumed with: `Command({ resume: <this> })`. */
const ResumeRunIdSchema = z.string().min(1).max(200).optional();
export const ToolChainResumeSchema = z.union([
  z.object({ runId: ResumeRunIdSchema, decisions: z.record(z.string(), ToolChainDecisionSchema) }).strict(),
  z.object({ runId: ResumeRunIdSchema, cancel: z.literal(true), reason: z.string().max(2_000).optional() }).strict(),
]);
export type ToolChainResume = z.infer<typeof ToolChainResumeSchema>;

export interface ResumeError {
  code: string;
  message: string;
}

/** The payload of the agent's interrupt while a chain waits. */
export interface ToolChainInterrupt {
  type: "tool_chain_confirmation";
  tool: "run_tool_chain";
  runId: string;
  goal?: string;
  /** What the person is asked, in words. */
  message: string;
  pending: (AgentPendingStep & { decisions: readonly string[] })[];
  steps: ToolChainRunResult["steps"];
  /** The expected resume value. */
  resume: { shape: string; example: ToolChainResume; notes: string };
  /** Set when the previous resume value was refused: nothing of it was applied, unless it says so. */
  resumeError?: ResumeError;
}

const SHAPE =
  '{ runId?: string, decisions: { <stepId>: { decision: "approve" | "reject", arguments?: { ... }, comment?: string } } }';

export function confirmationInterrupt(r: AgentRunResult, resumeError?: ResumeError): ToolChainInterrupt {
  const first = r.pending[0]!;
  const ask = r.pending.map((p) => `"${p.stepId}" (${p.skillName})`).join(", ");
  return {
    type: "tool_chain_confirmation",
    tool: "run_tool_chain",
    runId: r.runId,
    ...(r.goal ? { goal: r.goal } : {}),
    message: [
      `Tool-chain run ${r.runId} waits for a decision on ${ask}. Review each step's preview and arguments, then resume with your decisions.`,
      ...r.pending.flatMap((p) => versionChangeLines(p, (v) => brief(v)).map((l) => `"${p.stepId}": ${l}`)),
    ].join("\n"),
    pending: r.pending.map((p) => ({ ...p, decisions: DECISIONS_BY_KIND[p.kind ?? "confirmation"] })),
    steps: r.steps,
    resume: {
      shape: SHAPE,
      example: {
        runId: r.runId,
        decisions: { [first.stepId]: { decision: "approve", comment: "checked the preview" } },
      },
      notes:
        "Answer any subset of the pending steps: the others keep waiting and are asked again. `runId` is checked when given, and required when one model turn " +
        "started several chains (an answer only ever applies to the run it names). approve runs the step (`arguments` replaces its arguments, " +
        "validated again); reject fails it with REJECTED and the chain's failure policy applies. A step in doubt also takes mark_done (with `output`), a failed " +
        "compensation skip. `{ cancel: true, reason? }` cancels the whole run.",
    },
    ...(resumeError ? { resumeError } : {}),
  };
}

export type ParsedResume = { ok: true; value: ToolChainResume } | { ok: false; error: ResumeError };

/**
 * Read a resume value against the steps that were waiting when the interrupt was raised. Refuses
 * (never ignores) anything else: a value of another shape, a step that was not waiting, a decision
 * that kind of wait does not take.
 */
export function parseResume(
  value: unknown,
  shown: { runId: string; pending: readonly AgentPendingStep[] },
  opts: { runIdRequired?: boolean } = {},
): ParsedResume {
  const { runId, pending } = shown;
  const parsed = ToolChainResumeSchema.safeParse(value);
  if (!parsed.success) {
    const got = value === undefined ? "nothing" : brief(value, 120);
    return {
      ok: false,
      error: {
        code: ErrorCode.INVALID_DECISION,
        message: `resume value ${got} does not match ${SHAPE} or { cancel: true }: ${z.prettifyError(parsed.error).replace(/\n/g, "; ")}`,
      },
    };
  }
  if (parsed.data.runId !== undefined && parsed.data.runId !== runId) {
    return {
      ok: false,
      error: {
        code: ErrorCode.CONFIRMATION_NOT_PENDING,
        message: `this answer is for run ${parsed.data.runId}; this question is about run ${runId}`,
      },
    };
  }
  if (parsed.data.runId === undefined && opts.runIdRequired) {
    return {
      ok: false,
      error: {
        code: ErrorCode.INVALID_DECISION,
        message: `several chains were started in this model turn: name the run the answer is for, { runId: "${runId}", decisions: { ... } }`,
      },
    };
  }
  if ("cancel" in parsed.data) return { ok: true, value: parsed.data };
  const entries = Object.entries(parsed.data.decisions);
  if (!entries.length)
    return {
      ok: false,
      error: {
        code: ErrorCode.INVALID_DECISION,
        message: "resume value has no decisions: answer at least one pending step",
      },
    };
  const waiting = pending.map((p) => p.stepId).join(", ");
  for (const [stepId, d] of entries) {
    const p = pending.find((s) => s.stepId === stepId);
    if (!p)
      return {
        ok: false,
        error: {
          code: ErrorCode.CONFIRMATION_NOT_PENDING,
          message: `step "${stepId}" is not waiting for a decision (waiting: ${waiting})`,
        },
      };
    const allowed = DECISIONS_BY_KIND[p.kind ?? "confirmation"];
    if (!allowed.includes(d.decision)) {
      return {
        ok: false,
        error: {
          code: ErrorCode.INVALID_DECISION,
          message: `step "${stepId}" waits for a ${p.kind ?? "confirmation"} decision: ${allowed.join(", ")}; got ${d.decision}`,
        },
      };
    }
    if (d.arguments !== undefined && d.decision !== "approve")
      return {
        ok: false,
        error: { code: ErrorCode.INVALID_DECISION, message: `step "${stepId}": arguments go with approve only` },
      };
  }
  return { ok: true, value: parsed.data };
}
