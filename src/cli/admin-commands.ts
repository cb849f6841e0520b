/**
 * The commands that own a process or a database: serve, worker, mcp, keys, prune, validate, the
 * demo; and the ones that only read (skills, plan), which also work on a server with `--url`.
 */
import { Command } from "commander";
import { openLive } from "../live/index.js";
import { openRuntime, type OpenedRuntime } from "../runtime/open.js";
import { configFromEnv, startServer } from "../server/serve.js";
import { PgAccessStore } from "../store/pg-access-store.js";
import { localOnly, printJson, withBackend, type Ctx } from "./context.js";
import { demoCommand } from "./demo.js";
import { Exit, jsonArg, usage } from "./exit.js";
import { keysCommand } from "./keys.js";
import { planCommand } from "./plan.js";
import type { Register } from "./run-commands.js";
import { paint } from "./render.js";
import { readFileSync } from "node:fs";

/** Until SIGINT or SIGTERM. */
const untilSignal = () =>
  new Promise<void>((resolve) => {
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
  });

async function withRuntime<T>(
  fn: (o: OpenedRuntime) => Promise<T>,
  opts: Parameters<typeof openRuntime>[0] = {},
): Promise<T> {
  const opened = await openRuntime(opts);
  try {
    return await fn(opened);
  } finally {
    await opened.close();
  }
}

export function registerAdminCommands(program: Command, register: Register): void {
  register(
    program.command("serve").summary("the HTTP API and executor (npm start); TOOLCHAIN_ROLE=api: API only"),
    async (ctx) => {
      localOnly(ctx, "serve");
      const srv = await startServer(configFromEnv());
      await untilSignal();
      await srv.close().catch(() => undefined);
      return Exit.ok;
    },
  );

  register(
    program.command("worker").summary("execute queued runs and take over runs of dead processes (server Postgres)"),
    async (ctx) => {
      localOnly(ctx, "worker");
      const cfg = configFromEnv(); // validated TOOLCHAIN_WORKER_POLL_MS / TOOLCHAIN_WORKER_MAX_ACTIVE
      return withRuntime(async ({ runtime, db }) => {
        const retention = process.env.TOOLCHAIN_CHECKPOINT_RETENTION_HOURS;
        // publish this worker's run changes to API processes (Redis) and invalidate their cached views
        const live = await openLive({ store: runtime.store, db, redisUrl: process.env.REDIS_URL || undefined });
        const stopWorker = runtime.startWorker({
          pollMs: cfg.workerPollMs,
          maxActive: cfg.workerMaxActive,
          ...(retention ? { retainCheckpointsMs: Number(retention) * 3_600_000 } : {}),
        });
        console.error(`worker ${runtime.owner} polling for runs`);
        await untilSignal();
        await stopWorker();
        await runtime.drain();
        await live.close();
        return Exit.ok;
      });
    },
  );

  register(
    program
      .command("mcp")
      .summary("the MCP server on stdio (see README, MCP)")
      .option("--workspace <id>", "the workspace its tools act in"),
    async (ctx, _a, o) => {
      localOnly(ctx, "mcp");
      const { serveMcpStdio } = await import("../mcp/stdio.js");
      const timeout = process.env.TOOLCHAIN_MCP_ELICITATION_TIMEOUT_MS;
      await serveMcpStdio({
        workspace: (o.workspace as string | undefined) ?? (process.env.TOOLCHAIN_WORKSPACE || undefined),
        apiKey: process.env.TOOLCHAIN_API_KEY || undefined,
        ...(timeout ? { elicitationTimeoutMs: Number(timeout) } : {}),
      });
      return Exit.ok;
    },
  );

  // keys: subcommands mapped onto keysCommand (also used by the API tests); its output is JSON always
  const keys = program
    .command("keys")
    .summary("API keys: create, list, revoke (stop the server first on an embedded database)");
  const keysAction = (args: string[]) => async (ctx: Ctx) => {
    localOnly(ctx, "keys");
    return withRuntime(({ db, tables }) =>
      keysCommand(new PgAccessStore(db), args, undefined, {
        onWorkspace: async (ws) => {
          const t = await tables?.ensureWorkspace(ws);
          return t ? { tasksTable: { id: t.id, name: t.name } } : undefined;
        },
      }),
    );
  };
  register(
    keys
      .command("create")
      .summary("a key for a workspace (printed once)")
      .requiredOption("--workspace <id>", "the key's workspace (created if new)")
      .option("--skills <list>", "the workspace's skill allowlist: a,b or pack.* (* = every skill)")
      .option("--label <text>", "a label shown by keys list")
      .option(
        "--permit <list>",
        "permissions: relax_confirmation (plans may remove confirmations where the skill allows it)",
      )
      .option("--user <id>", "a personal key: decisions made with it are this person's")
      .option("--name <text>", "with --user: the person's display name")
      .option("--roles <list>", "with --user: workspace roles admin, operator, approver, viewer (none: every power)"),
    (ctx, _a, o) => {
      const pass = (flag: string, v: unknown) => (v !== undefined ? [flag, v as string] : []);
      return keysAction([
        "create",
        "--workspace",
        o.workspace as string,
        ...pass("--skills", o.skills),
        ...pass("--label", o.label),
        ...pass("--permit", o.permit),
        ...pass("--user", o.user),
        ...pass("--name", o.name),
        ...pass("--roles", o.roles),
      ])(ctx);
    },
  );
  register(
    keys
      .command("list")
      .summary("keys (never the keys themselves)")
      .option("--workspace <id>", "only this workspace's"),
    (ctx, _a, o) => keysAction(["list", ...(o.workspace ? ["--workspace", o.workspace as string] : [])])(ctx),
  );
  register(
    keys.command("revoke").summary("revoke a key (exit 1 if there is no such key)").argument("<keyId>"),
    (ctx, [id]) => keysAction(["revoke", id as string])(ctx),
  );

  register(
    program
      .command("prune")
      .summary("delete checkpoints of runs finished before a time (history stays)")
      .option("--older-than-hours <n>", "default TOOLCHAIN_CHECKPOINT_RETENTION_HOURS or 168"),
    async (ctx, _a, o) => {
      localOnly(ctx, "prune");
      const hours = Number(o.olderThanHours ?? process.env.TOOLCHAIN_CHECKPOINT_RETENTION_HOURS ?? 168);
      if (!Number.isFinite(hours)) throw usage("--older-than-hours: a number");
      return withRuntime(async ({ runtime }) => {
        const pruned = await runtime.pruneCheckpoints({ olderThanMs: hours * 3_600_000 });
        if (ctx.json) printJson(ctx, { pruned });
        else
          ctx.out(
            pruned.length
              ? `pruned the checkpoints of ${pruned.length} run${pruned.length === 1 ? "" : "s"}: ${pruned.join(", ")}`
              : "nothing to prune",
          );
        return Exit.ok;
      });
    },
  );

  register(
    program
      .command("validate")
      .summary("validate a plan (nothing runs)")
      .argument("<plan>", "plan file (JSON)")
      .option("--context <json|file>", "checked against $ref: context.…"),
    async (ctx, [file], o) => {
      localOnly(ctx, "validate");
      let plan: unknown;
      try {
        plan = JSON.parse(readFileSync(file as string, "utf8"));
      } catch (e) {
        const err = e as NodeJS.ErrnoException;
        throw usage(`${String(file)}: ${err.code === "ENOENT" ? "no such file" : err.message}`);
      }
      const context = jsonArg(o.context as string | undefined, "--context");
      // validation needs the skills, not the runs: never open an embedded database a server may hold
      return withRuntime(
        async ({ runtime }) => {
          const c = runtime.validate(plan, context !== undefined ? { context } : {});
          if (ctx.json) printJson(ctx, { valid: true, steps: c.steps.length, topologicalOrder: c.topo });
          else ctx.out(`valid: ${c.steps.length} steps; topological order: ${c.topo.join(", ")}`);
          return Exit.ok;
        },
        process.env.DATABASE_URL ? {} : { dataDir: ":memory:" },
      );
    },
  );

  register(program.command("skills").summary("the skills a plan can use (remote: the key's workspace)"), (ctx) =>
    withBackend(ctx, undefined, async (b) => {
      const skills = await b.skills();
      if (ctx.json) printJson(ctx, skills);
      else {
        const w = Math.max(...skills.map((s) => s.name.length));
        ctx.out(paint(ctx.style, "bold", `${"SKILL".padEnd(w)}  EFFECTS   CONFIRM      DESCRIPTION`));
        for (const s of skills)
          ctx.out(
            `${s.name.padEnd(w)}  ${String(s.sideEffects).padEnd(8)}  ${String(s.requiresConfirmation === true ? "always" : s.requiresConfirmation === false ? "" : s.requiresConfirmation).padEnd(11)}  ${s.description.split("\n")[0]}`,
          );
      }
      return Exit.ok;
    }),
  );

  register(
    program
      .command("plan")
      .summary("plan a request (nothing runs)")
      .requiredOption("-r, --request <text>", "what to do, in words")
      .option("--context <json|file>", "the run's context (business coordinates such as table: { id })")
      .option("--memory <json|file>", "initial chain memory")
      .option("--workspace <id>", "local only: plan with this workspace's skills")
      .option("-o, --out <file>", "also write the plan to this file (then: toolchain run <file>)"),
    (ctx, _a, o) => withBackend(ctx, o.workspace as string | undefined, (b) => planCommand(ctx, b, o)),
  );

  register(
    program
      .command("demo", { isDefault: true })
      .summary("the approval-system chain on the QTable skills, with live progress (the default command)")
      .option("--approve", "approve the records at once")
      .option("--reject", "reject them at once")
      .option("--context <json|file>", "merged over the demo's context")
      .option("--no-input", "never ask: leave the run waiting (exit 3)"),
    async (ctx, _a, o) => {
      localOnly(ctx, "demo");
      if (o.approve && o.reject) throw usage("demo: --approve or --reject, not both");
      return withRuntime((opened) => demoCommand(opened, ctx, o));
    },
  );
}
