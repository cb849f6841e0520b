/**
 * The MCP server: the five tool-chain tools (src/tools/definitions.ts) over the RunService the
 * REST routes use, so the skill allowlist, workspace isolation and the durable confirm path are
 * the same. One McpServer per MCP session (HTTP) or process (stdio); `principal(extra)` says
 * whose session it is.
 *
 * run_tool_chain and confirm_tool_chain_step settle the run (terminal or waiting). When it waits
 * and the client declared elicitation, each waiting step is put to the user in turn and the answer
 * recorded through `confirm` / `cancel`, exactly as a REST client would; without elicitation, or
 * when the user does not answer within `elicitationTimeoutMs`, the tool returns the waiting run.
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { PlanAuthor } from "../plan/admission.js";

const MCP_AUTHOR: PlanAuthor = { kind: "agent", via: "mcp" };
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  ElicitResultSchema,
  type CallToolResult,
  type ServerNotification,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import { ErrorCode, ToolchainError, isErrorCode } from "../kernel/errors.js";
import type { RunFeeds } from "../live/feeds.js";
import type { Principal } from "../store/access-store.js";
import type { Outcome, RunService } from "../service/run-service.js";
import type { ApiRunView } from "../service/views.js";
import { traceIdFrom } from "../service/run-service.js";
import { carrierFrom } from "../telemetry/trace-context.js";
import { contextOf, inContext } from "../telemetry/tracing.js";
import {
  cancelToolChainRunTool,
  redriveToolChainRunTool,
  confirmToolChainStepTool,
  getToolChainRunTool,
  planToolChainTool,
  runToolChainTool,
  type PendingStep,
} from "../tools/definitions.js";
import { planSummary, runSummary, toPlanResult, toRunResult } from "../tools/results.js";
import { answerOf, confirmationQuestion } from "./elicitation.js";
import { ProgressTracker } from "./progress.js";

export type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

export interface McpToolsOptions {
  service: RunService;
  feeds: RunFeeds;
  /** Who calls (HTTP: from the request's API key; stdio: the configured workspace). */
  principal: (extra: Extra) => Principal;
  /** How long one confirmation question waits for the user. @default 300000 */
  elicitationTimeoutMs?: number;
}

export const SERVER_INFO = { name: "toolchain-runtime", version: "0.1.0" } as const;

const INSTRUCTIONS =
  "Tool chains: plan_tool_chain turns a request into a plan of skill calls; run_tool_chain runs a plan (or a request) durably. " +
  'Steps with side effects may wait for the user\'s confirmation: when a result has status "waiting_confirmation", ask the user about each pending step ' +
  "and answer with confirm_tool_chain_step. Never approve on the user's behalf. get_tool_chain_run shows a run; cancel_tool_chain_run stops one and compensates; redrive_tool_chain_run runs a failed one again from where it failed (when the user asks).";

/** A coded error as a tool result the model can read (isError), not a protocol failure. */
function errorResult(e: unknown): CallToolResult {
  const code =
    e && typeof e === "object" && isErrorCode((e as { code?: unknown }).code)
      ? (e as ToolchainError).code
      : ErrorCode.INTERNAL;
  const message = code === ErrorCode.INTERNAL ? "internal error" : (e as Error).message;
  const details = code === ErrorCode.INTERNAL ? undefined : (e as ToolchainError).details;
  const error = { code, message, ...(details !== undefined ? { details } : {}) };
  return {
    isError: true,
    content: [
      { type: "text", text: `${code}: ${message}` },
      { type: "text", text: JSON.stringify({ error }) },
    ],
  };
}

function runToolResult(view: ApiRunView): CallToolResult {
  const r = toRunResult(view);
  return { structuredContent: r, content: [{ type: "text", text: runSummary(r) }] };
}

const canElicit = (server: McpServer) => Boolean(server.server.getClientCapabilities()?.elicitation?.form);

export function createToolchainMcpServer(o: McpToolsOptions): McpServer {
  const { service, feeds } = o;
  const answerTimeoutMs = o.elicitationTimeoutMs ?? 300_000;
  const server = new McpServer(SERVER_INFO, { capabilities: { tools: {}, logging: {} }, instructions: INSTRUCTIONS });

  const guarded =
    <A>(fn: (args: A, extra: Extra) => Promise<CallToolResult>) =>
    async (args: A, extra: Extra): Promise<CallToolResult> => {
      try {
        // the caller's trace context travels in params._meta (MCP semantic conventions)
        return await inContext(contextOf(carrierFrom(extra._meta ?? {})), () => fn(args, extra));
      } catch (e) {
        if (!(e && typeof e === "object" && isErrorCode((e as { code?: unknown }).code)))
          console.error("mcp tool failed", e);
        return errorResult(e);
      }
    };

  /**
   * Progress notifications from the run's stored events, for a call that passed a progress token.
   * The feed catches up from the store, so starting once the steps are known loses nothing.
   */
  const followProgress = (
    extra: Extra,
    runId: string,
    after: number,
    steps: () => Promise<ConstructorParameters<typeof ProgressTracker>[0]>,
  ) => {
    const token = extra._meta?.progressToken;
    if (token === undefined) return () => undefined;
    let stopped = false;
    let unlisten = () => undefined as void;
    void steps()
      .then((s) => {
        if (stopped) return;
        const tracker = new ProgressTracker(s);
        unlisten = feeds.listen(
          runId,
          { after, until: "terminal" },
          (e) => {
            const u = tracker.next(e);
            if (u && !stopped)
              void extra
                .sendNotification({ method: "notifications/progress", params: { progressToken: token, ...u } })
                .catch(() => undefined);
          },
          () => undefined,
        );
      })
      .catch(() => undefined); // progress is a courtesy: the result carries the truth
    return () => {
      stopped = true;
      unlisten();
    };
  };

  /**
   * The run settled waiting: ask the user about each waiting step, one after another, and record
   * each answer through the durable confirm/cancel path. Returns the run as it is when nothing
   * more can be asked (finished, a step the user must answer elsewhere, no answer in time).
   */
  const askUntilSettled = async (p: Principal, first: Outcome, extra: Extra): Promise<ApiRunView> => {
    let view = first.view;
    if (!canElicit(server)) return view;
    const asked = new Set<string>();
    while (view.status === "waiting_confirmation" && !extra.signal.aborted) {
      // each wait is asked once: a later wait of the same step (another round) is a new question
      const step = toRunResult(view).pending.find(
        (s: PendingStep) => s.kind === "confirmation" && !asked.has(`${s.stepId}@${s.round ?? 0}`),
      );
      if (!step) break;
      asked.add(`${step.stepId}@${step.round ?? 0}`);
      let answer;
      try {
        const result = await extra.sendRequest(
          { method: "elicitation/create", params: confirmationQuestion(view.runId, view.plan.goal, step) },
          ElicitResultSchema,
          {
            timeout: answerTimeoutMs,
            signal: extra.signal,
          },
        );
        answer = answerOf(result);
      } catch {
        // no answer in time, or the client went away: the step keeps waiting durably
        break;
      }
      try {
        if (answer.kind === "cancel_run") {
          // "cancel" dismisses this question: a late one must not cancel a run that has moved on
          const now = await service.view(p, view.runId);
          if (!now.pendingConfirmations.some((x) => x.stepId === step.stepId && (x.round ?? 0) === (step.round ?? 0))) {
            throw new ToolchainError(
              ErrorCode.CONFIRMATION_NOT_PENDING,
              `step "${step.stepId}" no longer waits in round ${step.round ?? 0}`,
            );
          }
        }
        const outcome =
          answer.kind === "cancel_run"
            ? await service.cancel(
                p,
                view.runId,
                { reason: answer.comment ?? "cancelled by the user when asked to confirm a step" },
                "mcp",
              )
            : // the answer is for the wait it was asked about: if the step now waits in another round, it is refused
              // elicitation asks the person behind the session: the decision is theirs, through MCP
              await service.confirm(
                p,
                view.runId,
                {
                  stepId: step.stepId,
                  decision: answer.decision,
                  round: step.round ?? 0,
                  ...(answer.comment ? { comment: answer.comment } : {}),
                },
                "mcp",
              );
        view = outcome.view;
        if (outcome.kind === "accepted") break; // still running after the server's wait limit
      } catch (e) {
        // answered meanwhile from elsewhere (API, console, another session): go on from the current state
        if ((e as ToolchainError).code !== ErrorCode.CONFIRMATION_NOT_PENDING) throw e;
        view = await service.view(p, view.runId);
      }
    }
    return view;
  };

  server.registerTool(
    planToolChainTool.name,
    { ...planToolChainTool },
    guarded(async (args, extra) => {
      // the same planner as POST /api/tool-chains/plan: the workspace's allowlist, a validated plan
      const out = await service.plan(o.principal(extra), { request: args.request, context: args.context });
      const registry = service.runtime.registry;
      // a skill that decides per arguments ("conditional") may ask: say so
      const r = toPlanResult(out, registry);
      return { structuredContent: r, content: [{ type: "text", text: planSummary(r) }] };
    }),
  );

  server.registerTool(
    runToolChainTool.name,
    { ...runToolChainTool },
    guarded(async (args, extra) => {
      const p = o.principal(extra);
      let stop: () => void = () => undefined;
      try {
        const body = args.plan !== undefined ? { plan: args.plan } : { request: args.request, autoPlan: true };
        const outcome = await service.run(
          p,
          { ...body, context: args.context, memory: args.memory },
          traceIdFrom(carrierFrom(extra._meta ?? {})?.traceparent),
          {
            onStart: (runId) => {
              // the run's row may not be committed yet: the steps come from the call (a request's from planning_completed)
              const steps = (args.plan?.steps ?? []).map((st) => ({ stepId: st.stepId, status: "pending" as const }));
              stop = followProgress(extra, runId, 0, async () => steps);
            },
          },
          MCP_AUTHOR,
          "mcp",
        ); // a plan from an MCP client is an agent's: clamped and budgeted (src/plan/admission.ts)
        return runToolResult(await askUntilSettled(p, outcome, extra));
      } finally {
        stop();
      }
    }),
  );

  server.registerTool(
    getToolChainRunTool.name,
    { ...getToolChainRunTool },
    guarded(async (args, extra) => runToolResult(await service.view(o.principal(extra), args.runId))),
  );

  server.registerTool(
    confirmToolChainStepTool.name,
    { ...confirmToolChainStepTool },
    guarded(async (args, extra) => {
      const p = o.principal(extra);
      const { runId, ...decision } = args;
      const row = await service.own(p, runId); // not found for another workspace's run
      const before = await service.view(p, runId);
      const stop = followProgress(extra, runId, row.lastSeq, async () => before.steps);
      try {
        const outcome = await service.confirm(p, runId, decision, "mcp");
        return runToolResult(await askUntilSettled(p, outcome, extra));
      } finally {
        stop();
      }
    }),
  );

  server.registerTool(
    cancelToolChainRunTool.name,
    { ...cancelToolChainRunTool },
    guarded(async (args, extra) => {
      const outcome = await service.cancel(
        o.principal(extra),
        args.runId,
        { reason: args.reason ?? "cancelled through MCP" },
        "mcp",
      );
      return runToolResult(outcome.view);
    }),
  );

  server.registerTool(
    redriveToolChainRunTool.name,
    { ...redriveToolChainRunTool },
    guarded(async (args, extra) => {
      const outcome = await service.redrive(o.principal(extra), args.runId, { overrides: args.overrides }, "mcp");
      return runToolResult(outcome.view);
    }),
  );

  return server;
}
