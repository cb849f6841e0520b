/**
 * `npm run demo`: the reference chain (examples/approval-system.plan.json) on the embedded
 * database, in workspace "local": split → (estimate ‖ describe schema) → Gantt → create records in
 * the workspace's "Tasks" table. It draws the steps live (like `toolchain run`), stops at the
 * records confirmation with the preview, and says how to approve (here, with the CLI, or over
 * HTTP). `--approve` / `--reject` decide at once; on a terminal it asks. Exit codes as `run`.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { OpenedRuntime } from "../runtime/open.js";
import { devKeyFile } from "../server/serve.js";
import { PgAccessStore } from "../store/pg-access-store.js";
import { defaultDataDir } from "../store/db.js";
import { ioFor, printJson, type Ctx } from "./context.js";
import { Exit, exitForStatus, jsonObjectArg } from "./exit.js";
import { askOnce, follow } from "./flow.js";
import type { ConfirmInput } from "../kernel/decision.js";
import { RunModel } from "./model.js";
import { previewText, summaryLine } from "./render.js";

export const DEMO_PLAN_FILE = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  "../../examples/approval-system.plan.json",
);
export const DEMO_WORKSPACE = "local";
export const DEMO_GOAL = "Plan an approval system with multi-level sign-off, e-mail notifications and an audit log";

export function loadDemoPlan(): unknown {
  return JSON.parse(readFileSync(DEMO_PLAN_FILE, "utf8"));
}

/** The next Monday after `today` (UTC), as YYYY-MM-DD. */
export function nextMonday(today = new Date()): string {
  const d = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate()));
  do d.setUTCDate(d.getUTCDate() + 1);
  while (d.getUTCDay() !== 1);
  return d.toISOString().slice(0, 10);
}

export async function demoCommand(opened: OpenedRuntime, ctx: Ctx, o: Record<string, unknown>): Promise<number> {
  const { runtime, db, tables } = opened;
  if (!tables) throw new Error("the demo needs the QTable pack (openRuntime({ qtable: true }))");
  const access = new PgAccessStore(db);
  await access.ensureWorkspace(DEMO_WORKSPACE);
  const table = await tables.ensureWorkspace(DEMO_WORKSPACE);
  const context = {
    goal: DEMO_GOAL,
    table: { id: table.id, name: table.name },
    startDate: nextMonday(),
    holidays: [] as string[],
    ...(jsonObjectArg(o.context as string | undefined, "--context") ?? {}),
  };
  const io = ioFor(ctx, o.input === false || Boolean(o.approve) || Boolean(o.reject));
  if (!ctx.json) {
    ctx.out(`Demo: "${context.goal}"`);
    ctx.out(
      `plan ${path.relative(process.cwd(), DEMO_PLAN_FILE)} · workspace "${DEMO_WORKSPACE}" · table "${table.name}" (${table.id}) · start ${context.startDate} · ${db.kind === "embedded" ? "embedded Postgres" : "Postgres server"}\n`,
    );
  }
  const plan = loadDemoPlan() as Parameters<RunModel["setPlan"]>[0];
  const h = runtime.run(plan, { workspaceId: DEMO_WORKSPACE, context });
  const model = new RunModel(h.runId);
  model.setPlan(plan);
  let view = await follow(h, model, io);
  const pending = view.pendingConfirmations.find((p) => p.stepId === "create");
  if (view.status === "waiting_confirmation" && pending) {
    const keyFile = await ensureLocalKey(access, db.kind);
    // the key is never printed: the hint reads it from its file
    const keyRef = keyFile ? `$(cat ${path.relative(process.cwd(), keyFile) || keyFile})` : "<your key>";
    if (!ctx.json) {
      ctx.out(
        `\nThe run waits for confirmation of step "create" (qtable.task.records.create); nothing is written until then.\n`,
      );
      ctx.out(previewText(pending.preview));
      ctx.out(`
Decide now, or later (the run waits durably, across restarts):
  npx toolchain approve ${view.runId} create      # or: reject
or over HTTP, with the server running (npm start):
  npx toolchain approve ${view.runId} create --url http://127.0.0.1:8080 --key ${keyRef}
  curl -s http://127.0.0.1:8080/api/tool-chains/runs/${view.runId}/confirm \\
    -H "Authorization: Bearer ${keyRef}" -H 'content-type: application/json' \\
    -d '{"stepId": "create", "decision": "approve"}'
`);
    }
    let decision: ConfirmInput["decision"] | undefined = o.approve ? "approve" : o.reject ? "reject" : undefined;
    if (!decision && io.interactive) decision = (await askOnce(pending, io))?.decision;
    if (!decision) {
      if (ctx.json) printJson(ctx, view);
      else ctx.out(`Left waiting: run ${view.runId}.`);
      // a demo left waiting did what it shows (as before this CLI had exit code 3); `run` exits 3
      return Exit.ok;
    }
    if (!ctx.json) ctx.out(`${decision === "approve" ? "Approving" : decision === "reject" ? "Rejecting" : decision}…`);
    view = await follow(await runtime.confirm(view.runId, { stepId: "create", decision }), model, io);
  }
  if (ctx.json) {
    printJson(ctx, view);
    return exitForStatus(view.status);
  }
  ctx.out(`\n${summaryLine(view, ctx.style, model.lastAt !== undefined ? model.workedMs(model.lastAt) : undefined)}`);
  const gantt = view.steps.find((s) => s.stepId === "gantt")?.output as
    { finish?: string; criticalPath?: string[] } | undefined;
  if (gantt?.finish) ctx.out(`finish ${gantt.finish}; critical path: ${gantt.criticalPath?.join(" → ")}`);
  const page = await tables.listRecords(DEMO_WORKSPACE, table.id, { limit: 1_000 });
  ctx.out(`table "${table.name}" now holds ${page?.records.length ?? 0} records (GET /api/tables/${table.id}/records)`);
  ctx.out(`the run: npx toolchain show ${view.runId}`);
  return exitForStatus(view.status);
}

/** The file of the local development key (embedded): the same one `npm start` prints; created if no key exists. */
async function ensureLocalKey(access: PgAccessStore, kind: "server" | "embedded"): Promise<string | undefined> {
  if (kind !== "embedded") return undefined;
  const file = devKeyFile(process.env.TOOLCHAIN_DATA_DIR || defaultDataDir());
  if (!file) return undefined;
  if (existsSync(file)) return file;
  if ((await access.countKeys()) > 0) return undefined;
  const { key } = await access.createKey(DEMO_WORKSPACE, { label: "local development" });
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${key}\n`, { mode: 0o600 });
  return file;
}
