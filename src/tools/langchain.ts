/**
 * Chains as LangChain tools for chat agents: `plan_tool_chain` and `run_tool_chain`, with the
 * names, descriptions and zod schemas every agent surface shares (src/tools/definitions.ts), over
 * the Runtime with a workspace and skill allowlist applied as the REST API applies a key's.
 *
 * Inside a LangGraph graph with a checkpointer (ToolNode, createAgent), a chain that waits for a
 * person raises the agent's own `interrupt()` (src/tools/agent-confirmation.ts); resuming the agent
 * with `Command({ resume: { decisions } })` records them through the runtime's durable confirm path
 * and the tool goes on until the chain finishes. Outside a graph it answers at once with the
 * waiting run and how to confirm it.
 *
 * LangGraph re-executes a task that called `interrupt()` from its start on every resume. So:
 * - the run's id is derived from the thread and the tool call: a re-execution finds the run it
 *   started and continues it; it never starts a second one;
 * - each start / settle / apply-decisions step is a LangGraph `task()`, whose result the
 *   checkpointer keeps: on a re-execution those steps return what they returned the first time,
 *   so every resume value is read against the exact pending list (rounds included) its interrupt
 *   showed, and no decision is applied twice;
 * - runtime calls run outside the agent's LangGraph context, or the runtime's own graph would
 *   inherit the agent's checkpoint namespace and callbacks (and stream into the agent's messages).
 */
import type { Acting, Actor } from "../kernel/actor.js";
import { createHash, randomUUID } from "node:crypto";
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
import { tool, type ToolRunnableConfig } from "@langchain/core/tools";
import { interrupt, task } from "@langchain/langgraph";
import { ErrorCode, isErrorCode, ToolchainError } from "../kernel/errors.js";
import type { RunEvent } from "../kernel/events.js";
import type { RunHandle, Runtime, RunOptions } from "../runtime/runtime.js";
import type { PlanAuthor } from "../plan/admission.js";

const AGENT_AUTHOR: PlanAuthor = { kind: "agent", via: "agent" };
import type { RunView } from "../kernel/run-view.js";
import { skillMatcher } from "../store/access-store.js";
import {
  confirmationInterrupt,
  parseResume,
  type AgentRunResult,
  type ResumeError,
  type ToolChainResume,
} from "./agent-confirmation.js";
import {
  planToolChainTool,
  RUN_TOOL_CHAIN_DESCRIPTION,
  runToolChainTool,
  type PlanToolChainInput,
  type PlanToolChainResult,
  type RunToolChainInput,
} from "./definitions.js";
import { brief, toPlanResult, toRunResult } from "./results.js";
import { versionChangeLines } from "../kernel/version-notice.js";
import { DEFAULT_WORKSPACE } from "../kernel/workspace.js";

export interface ToolChainToolsOptions {
  runtime: Runtime;
  /** Whose runs these are (skills scope their data by it), as an API key's workspace. @default DEFAULT_WORKSPACE */
  workspaceId?: string;
  /** The skills this agent may use: a predicate, or patterns as on API keys ("core.*", "qtable.notify.send"). Applied on top of the runtime's own allowlist. */
  allowSkill?: ((name: string) => boolean) | readonly string[];
  /**
   * The person this agent acts for: runs are recorded as requested by them, and their answers to
   * the agent's interrupts as their decisions (via "agent"). @default an agent principal, which
   * approval policies that name users or roles do not accept
   */
  actingFor?: Actor;
}

/** A coded error the model can read and act on (a refused plan, a skill outside the allowlist). */
export interface ToolChainErrorResult {
  error: { code: string; message: string; details?: unknown };
}

/** Outside a graph: the waiting run, and how a person's decision is recorded. */
export type WaitingAnswer = AgentRunResult & { how: string };

export type RunToolChainOutput = AgentRunResult | WaitingAnswer | ToolChainErrorResult;

// LangGraph's config keys for the checkpointer and for task() calls (constants it does not export
// from its main entry): present when the tool runs inside a graph that can interrupt and resume.
const CHECKPOINTER_KEY = "__pregel_checkpointer";
const CALL_KEY = "__pregel_call";

/** UUIDv5-style namespace for run ids derived from tool calls. */
const RUN_ID_NAMESPACE = Buffer.from("6f1d2c4e8a3b4f5d9e7c1a2b3c4d5e6f", "hex");

/** A UUID (version 5 layout, SHA-1) for `name`: the same tool call always maps to the same run. */
export function toolCallRunId(workspaceId: string, threadId: string, toolCallId: string): string {
  const h = createHash("sha1")
    .update(RUN_ID_NAMESPACE)
    .update(JSON.stringify([workspaceId, threadId, toolCallId]))
    .digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString("hex");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/** Run `fn` (and everything it starts) outside any LangChain/LangGraph context. */
function detached<T>(fn: () => Promise<T>): Promise<T> {
  return AsyncLocalStorageProviderSingleton.getInstance().run(undefined, fn) as Promise<T>;
}

function coded(e: unknown): ToolChainErrorResult | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  if (!isErrorCode(code)) return undefined;
  const details = (e as ToolchainError).details;
  return { error: { code, message: (e as Error).message, ...(details !== undefined ? { details } : {}) } };
}

const isError = (r: unknown): r is ToolChainErrorResult =>
  typeof r === "object" && r !== null && "error" in r && !("runId" in r);

/** Read the rest of a drive's events so nothing buffers for nobody. */
function drain(events: AsyncIterable<RunEvent>): void {
  const it = events[Symbol.asyncIterator]();
  void (async () => {
    for (;;) if ((await it.next()).done) return;
  })().catch(() => undefined);
}

/** The handle's view once the run is terminal or waits; an aborted agent stops waiting (the run goes on). */
async function settled(handle: RunHandle, signal: AbortSignal | undefined): Promise<RunView> {
  if (!signal) return handle.result;
  if (signal.aborted) {
    handle.release?.();
    throw signal.reason;
  }
  let onAbort!: () => void;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => {
      handle.release?.();
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([handle.result, aborted]);
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}

/** The run as the tools answer it: toRunResult's shape, each pending step with its round. */
function agentResult(view: RunView): AgentRunResult {
  const r = toRunResult(view);
  const round = new Map(view.pendingConfirmations.map((p) => [p.stepId, p.round ?? 0]));
  return { ...r, pending: r.pending.map((p) => ({ ...p, round: round.get(p.stepId) ?? 0 })) };
}

const waitsForPerson = (r: AgentRunResult) => r.status === "waiting_confirmation" && r.pending.length > 0;

function how(r: AgentRunResult): string {
  const s = r.pending[0]!;
  return (
    `Nothing more runs until a person decides. Show the user each pending step (preview and arguments) and ask them; never decide for them. ` +
    `Their decision is recorded with POST /api/tool-chains/runs/${r.runId}/confirm and a body like {"stepId":"${s.stepId}","decision":"approve","round":${s.round}} ` +
    `(or "reject"), the MCP tool confirm_tool_chain_step, or runtime.confirm("${r.runId}", { stepId, decision, round }). ` +
    `Inside a LangGraph graph with a checkpointer this tool asks through interrupt() instead.` +
    r.pending.flatMap((p) => versionChangeLines(p, (v) => brief(v)).map((l) => ` Step "${p.stepId}": ${l}`)).join("")
  );
}

/**
 * How many run_tool_chain calls the model made in the turn that made this one (from the agent state
 * ToolNode hands the tool). Several chains waiting in one turn share the agent's resume: a bare
 * ToolNode runs them in one LangGraph task, where interrupts are matched to resume values by their
 * order across the tool calls, so each answer must name its run.
 */
function chainCallsInTurn(config: ToolRunnableConfig): number {
  const id = config?.toolCall?.id;
  const messages = (config as { state?: { messages?: unknown } })?.state?.messages;
  if (!id || !Array.isArray(messages)) return 1;
  for (let i = messages.length - 1; i >= 0; i--) {
    const calls = (messages[i] as { tool_calls?: { id?: string; name?: string }[] })?.tool_calls;
    if (calls?.some((c) => c.id === id)) return calls.filter((c) => c.name === runToolChainTool.name).length;
  }
  return 1;
}

// there is no confirm tool here: the person is asked through the agent's interrupt, or told `how`
const RUN_DESCRIPTION =
  RUN_TOOL_CHAIN_DESCRIPTION +
  "Steps with side effects may need the user's confirmation: the user is then asked directly (the conversation pauses until they answer) and " +
  'this tool returns the final result. If it returns status "waiting_confirmation" instead, show the user each `pending` step (its preview and ' +
  "arguments) and tell them how to confirm (see `how`); never approve on the user's behalf.";

/** A duplicate insert of the run row: another call started this run first (a race on the same tool call). */
const isDuplicateRun = (e: unknown) =>
  (e as { code?: unknown })?.code === "23505" || /already exists/.test((e as Error)?.message ?? "");

export function createToolChainTools(o: ToolChainToolsOptions) {
  const { runtime } = o;
  const workspaceId = o.workspaceId ?? DEFAULT_WORKSPACE;
  const allowSkill =
    typeof o.allowSkill === "function" ? o.allowSkill : o.allowSkill ? skillMatcher(o.allowSkill) : undefined;
  const scope: Pick<RunOptions, "workspaceId" | "allowSkill"> = { workspaceId, ...(allowSkill ? { allowSkill } : {}) };
  const acting: Acting = { by: o.actingFor ?? { kind: "agent", id: "langchain-tools" }, via: "agent" };

  const plan = tool(
    async (
      args: PlanToolChainInput,
      config: ToolRunnableConfig,
    ): Promise<PlanToolChainResult | ToolChainErrorResult> => {
      try {
        // the same planner and allowlist as POST /api/tool-chains/plan; nothing runs
        const out = await detached(() =>
          runtime.plan(args.request, { context: args.context ?? {}, ...scope, signal: config?.signal }),
        );
        return toPlanResult(out, runtime.registry);
      } catch (e) {
        const r = coded(e);
        if (r) return r;
        throw e;
      }
    },
    { name: planToolChainTool.name, description: planToolChainTool.description, schema: planToolChainTool.inputSchema },
  );

  /** The run this call started, or the one it started before a re-execution, when it settles. */
  const startOrContinue = async (
    runId: string,
    args: RunToolChainInput,
    signal?: AbortSignal,
  ): Promise<AgentRunResult | ToolChainErrorResult> => {
    try {
      const row = await runtime.store.getRow(runId);
      if (row && row.workspaceId !== workspaceId)
        throw new ToolchainError(ErrorCode.RUN_NOT_FOUND, `run ${runId} not found`);
      if (row || runtime.activeRuns().includes(runId)) return agentResult(await settled(runtime.attach(runId), signal));
      // a plan an agent wrote is clamped and budgeted, whatever it says (src/plan/admission.ts)
      const opts: RunOptions = {
        ...scope,
        context: args.context ?? {},
        memory: args.memory ?? {},
        runId,
        author: AGENT_AUTHOR,
        requestedBy: acting,
      };
      let handle: RunHandle;
      if (args.plan !== undefined) {
        const compiled = await runtime.validateAsync(args.plan, opts); // a coded error before anything exists
        // a racing call in this process may have started it meanwhile: run() would refuse it
        if (runtime.activeRuns().includes(runId)) return agentResult(await settled(runtime.attach(runId), signal));
        handle = runtime.run(args.plan, { ...opts, compiled });
      } else {
        handle = runtime.runRequest(args.request!, opts);
      }
      drain(handle.events);
      try {
        return agentResult(await settled(handle, signal));
      } catch (e) {
        // another process recorded the same run first: follow that one
        if (isDuplicateRun(e)) return agentResult(await settled(runtime.attach(runId), signal));
        throw e;
      }
    } catch (e) {
      const r = coded(e);
      if (r) return r;
      throw e;
    }
  };

  /**
   * Record the decisions (each for the round its interrupt showed: a stale one is refused, never
   * applied to a later wait), then wait until the run is terminal or waits again.
   */
  const apply = async (
    runId: string,
    resume: ToolChainResume,
    shown: AgentRunResult,
    signal?: AbortSignal,
  ): Promise<{ result: AgentRunResult; resumeError?: ResumeError }> => {
    const refused: { stepId?: string; code: string; message: string }[] = [];
    let handle: RunHandle | undefined;
    if ("cancel" in resume) {
      handle = await runtime.cancel(runId, resume.reason ?? "cancelled when asked to confirm a step", acting);
    } else {
      for (const p of shown.pending) {
        const d = resume.decisions[p.stepId];
        if (!d) continue;
        try {
          handle = await runtime.confirm(runId, { stepId: p.stepId, ...d, round: p.round }, acting);
        } catch (e) {
          const r = coded(e);
          if (!r) throw e;
          refused.push({ stepId: p.stepId, code: r.error.code, message: r.error.message });
        }
      }
    }
    const result = agentResult(await settled(handle ?? runtime.attach(runId), signal));
    if (!refused.length || !waitsForPerson(result)) return { result };
    return { result, resumeError: { code: refused[0]!.code, message: refused.map((r) => r.message).join("; ") } };
  };

  const run = tool(
    async (args: RunToolChainInput, config: ToolRunnableConfig): Promise<RunToolChainOutput> => {
      const conf = (config?.configurable ?? {}) as Record<string, unknown>;
      const inGraph = Boolean(conf[CHECKPOINTER_KEY]);
      // steps that must not repeat on a re-execution are LangGraph tasks there (their results are checkpointed)
      const durably = <T>(name: string, fn: () => Promise<T>): Promise<T> =>
        inGraph && typeof conf[CALL_KEY] === "function"
          ? (task({ name }, () => detached(fn))() as Promise<T>)
          : detached(fn);
      const threadId =
        typeof conf.thread_id === "string" || typeof conf.thread_id === "number" ? String(conf.thread_id) : undefined;
      const toolCallId = config?.toolCall?.id;
      const runId = threadId && toolCallId ? toolCallRunId(workspaceId, threadId, toolCallId) : randomUUID();
      const signal = config?.signal;

      const started = await durably("tool_chain_start", () => startOrContinue(runId, args, signal));
      if (isError(started)) return started;
      let result = started;
      if (!waitsForPerson(result)) return result;
      if (!inGraph) return { ...result, how: how(result) };

      let resumeError: ResumeError | undefined;
      const siblings = chainCallsInTurn(config);
      for (;;) {
        // not in a try block: interrupt() throws to suspend the agent
        const answer: unknown = interrupt(confirmationInterrupt(result, resumeError));
        const parsed = parseResume(answer, result, { runIdRequired: siblings > 1 });
        if (!parsed.ok) {
          // refused before anything was applied: ask again, saying why
          resumeError = parsed.error;
          continue;
        }
        const shown = result;
        const next = await durably("tool_chain_decide", () => apply(runId, parsed.value, shown, signal));
        result = next.result;
        resumeError = next.resumeError;
        if (!waitsForPerson(result)) return result;
      }
    },
    { name: runToolChainTool.name, description: RUN_DESCRIPTION, schema: runToolChainTool.inputSchema },
  );

  // an array, to pass as an agent's `tools`; also by name
  const tools: [typeof plan, typeof run] = [plan, run];
  return Object.assign(tools, { planToolChain: plan, runToolChain: run });
}
