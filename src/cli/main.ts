#!/usr/bin/env node
/**
 * `toolchain` CLI.
 *   demo [--approve|--reject]          the approval-system chain on the QTable pack (default)
 *   run <plan.json> [--context <json>] [--workspace <id>]  run a plan here, printing live events
 *   validate <plan.json>               validate only
 *   plan --request "…" [--context <json>]  plan a request (nothing runs): src/cli/plan.ts
 *   confirm <runId> <stepId> approve|reject|mark_done [--arguments <json>] [--output <json>]
 *   cancel <runId>
 *   show <runId>                       the run view
 *   worker                             execute queued runs and take over runs of dead processes
 *   prune --older-than-hours <n>       delete checkpoints of runs finished before that
 *   skills                             the skill manifest
 *   serve                              the HTTP API + executor (npm start); TOOLCHAIN_ROLE=api: API only
 *   keys create|list|revoke            API keys (src/cli/keys.ts)
 *   mcp [--workspace <id>]             the MCP server on stdio (src/mcp/stdio.ts)
 * Storage: DATABASE_URL (server Postgres) or embedded Postgres in TOOLCHAIN_DATA_DIR (./.data/pglite).
 */
import { readFile } from "node:fs/promises";
import type { RunEvent } from "../kernel/events.js";
import { openLive } from "../live/index.js";
import { openRuntime } from "../runtime/open.js";
import { configFromEnv, startServer } from "../server/serve.js";
import { PgAccessStore } from "../store/pg-access-store.js";
import { keysCommand } from "./keys.js";
import type { RunView } from "../runtime/view.js";
import { demoCommand } from "./demo.js";
import { planCommand } from "./plan.js";

function fmt(e: RunEvent): string {
  const d = e.data;
  const extra =
    e.type === "step_retrying" ? ` attempt ${d.attempt} failed (${(d.error as { code: string }).code}), retry in ${d.delayMs} ms`
    : e.type === "step_failed" ? ` ${(d.error as { code: string; message: string }).code}: ${(d.error as { message: string }).message}`
    : e.type === "step_waiting_confirmation" ? ` preview ${JSON.stringify(d.preview)}`
    : "";
  return `#${String(e.seq).padStart(3)} ${e.at.slice(11, 23)} ${e.type.padEnd(26)} ${e.stepId ?? ""}${extra}`;
}

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

async function printRun(h: { events: AsyncIterable<RunEvent>; result: Promise<RunView> }): Promise<RunView> {
  for await (const e of h.events) console.log(fmt(e));
  const view = await h.result;
  console.log(JSON.stringify({ runId: view.runId, status: view.status, result: view.result, error: view.error, pendingConfirmations: view.pendingConfirmations }, null, 2));
  return view;
}

async function main(argv: string[]): Promise<number> {
  const [cmd = "demo", ...args] = argv;
  if (cmd === "serve") {
    const srv = await startServer(configFromEnv());
    await new Promise<void>((resolve) => {
      const shutdown = () => void srv.close().then(resolve, resolve);
      process.once("SIGINT", shutdown);
      process.once("SIGTERM", shutdown);
    });
    return 0;
  }
  if (cmd === "mcp") {
    const { serveMcpStdio } = await import("../mcp/stdio.js");
    const timeout = process.env.TOOLCHAIN_MCP_ELICITATION_TIMEOUT_MS;
    await serveMcpStdio({
      workspace: flag(args, "--workspace") ?? (process.env.TOOLCHAIN_WORKSPACE || undefined),
      apiKey: process.env.TOOLCHAIN_API_KEY || undefined,
      ...(timeout ? { elicitationTimeoutMs: Number(timeout) } : {}),
    });
    return 0;
  }
  const opened = await openRuntime();
  const { runtime, db, tables, close } = opened;
  if (cmd === "keys") {
    try {
      return await keysCommand(new PgAccessStore(db), args, undefined, {
        onWorkspace: async (ws) => {
          const t = await tables?.ensureWorkspace(ws);
          return t ? { tasksTable: { id: t.id, name: t.name } } : undefined;
        },
      });
    } finally {
      await close();
    }
  }
  try {
    switch (cmd) {
      case "skills":
        console.log(JSON.stringify(runtime.registry.manifest(), null, 2));
        return 0;
      case "plan":
        return await planCommand(runtime, args);
      case "validate": {
        const c = runtime.validate(JSON.parse(await readFile(args[0] ?? "", "utf8")));
        console.log(`valid: ${c.steps.length} steps; topological order: ${c.topo.join(", ")}`);
        return 0;
      }
      case "demo":
        return await demoCommand(opened, args);
      case "run": {
        const plan = JSON.parse(await readFile(args[0] ?? "", "utf8"));
        const context = JSON.parse(flag(args, "--context") ?? "{}");
        const workspaceId = flag(args, "--workspace");
        if (workspaceId) await tables?.ensureWorkspace(workspaceId);
        const view = await printRun(runtime.run(plan, { context, ...(workspaceId ? { workspaceId } : {}) }));
        console.log(view.graph.mermaid);
        return view.status === "completed" || view.status === "waiting_confirmation" ? 0 : 1;
      }
      case "confirm": {
        const [runId, stepId, decision] = args;
        const a = flag(args, "--arguments");
        const o = flag(args, "--output");
        const view = await printRun(
          await runtime.confirm(runId ?? "", { stepId: stepId ?? "", decision: decision as "approve", ...(a ? { arguments: JSON.parse(a) } : {}), ...(o ? { output: JSON.parse(o) } : {}) }),
        );
        return view.status === "failed" ? 1 : 0;
      }
      case "cancel":
        await printRun(await runtime.cancel(args[0] ?? ""));
        return 0;
      case "show":
        console.log(JSON.stringify(await runtime.getRun(args[0] ?? ""), null, 2));
        return 0;
      case "prune": {
        const hours = Number(flag(args, "--older-than-hours") ?? process.env.TOOLCHAIN_CHECKPOINT_RETENTION_HOURS ?? 168);
        console.log(JSON.stringify({ pruned: await runtime.pruneCheckpoints({ olderThanMs: hours * 3_600_000 }) }));
        return 0;
      }
      case "worker": {
        const retention = process.env.TOOLCHAIN_CHECKPOINT_RETENTION_HOURS;
        // publish this worker's run changes to API processes (Redis) and invalidate their cached views
        const live = await openLive({ store: runtime.store, db, redisUrl: process.env.REDIS_URL || undefined });
        const stopWorker = runtime.startWorker({ pollMs: Number(process.env.TOOLCHAIN_WORKER_POLL_MS ?? 1_000), ...(retention ? { retainCheckpointsMs: Number(retention) * 3_600_000 } : {}) });
        console.error(`worker ${runtime.owner} polling for runs`);
        const stop = async () => {
          await stopWorker();
          await runtime.drain();
          await live.close();
        };
        await new Promise<void>((resolve) => {
          const shutdown = () => void stop().then(resolve);
          process.once("SIGINT", shutdown);
          process.once("SIGTERM", shutdown);
        });
        return 0;
      }
      default:
        console.error(`unknown command "${cmd}". Commands: serve, keys, mcp, demo, run, plan, validate, confirm, cancel, show, worker, prune, skills`);
        return 2;
    }
  } finally {
    await close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    console.error(e?.code ? `${e.code}: ${e.message}` : e);
    process.exit(e?.code ? 2 : 1);
  },
);
