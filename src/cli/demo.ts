/**
 * `npm run demo`: the reference chain (examples/approval-system.plan.json) on the embedded
 * database, in workspace "local": split → (estimate ‖ describe schema) → Gantt → create records in
 * the workspace's "Tasks" table. It prints live events, stops at the records confirmation with the
 * preview, and says how to approve (here, with the CLI, or over HTTP). `--approve` / `--reject`
 * decide at once; on a terminal it asks.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline/promises";
import { fileURLToPath } from "node:url";
import type { RunEvent } from "../kernel/events.js";
import type { OpenedRuntime } from "../runtime/open.js";
import type { RunView } from "../runtime/view.js";
import { devKeyFile } from "../server/serve.js";
import { PgAccessStore } from "../store/pg-access-store.js";

export const DEMO_PLAN_FILE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../examples/approval-system.plan.json");
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

export function formatEvent(e: RunEvent): string {
  const d = e.data;
  const extra =
    e.type === "step_retrying" ? ` attempt ${d.attempt} failed (${(d.error as { code: string }).code}), retry in ${d.delayMs} ms`
    : e.type === "step_failed" ? ` ${(d.error as { code: string; message: string }).code}: ${(d.error as { message: string }).message}`
    : e.type === "step_started" ? ` ${String(d.skillName)}`
    : "";
  return `#${String(e.seq).padStart(3)} ${e.at.slice(11, 23)} ${e.type.padEnd(26)} ${e.stepId ?? ""}${extra}`;
}

/** The records preview as a text table. */
export function previewTable(preview: unknown): string {
  const p = preview as { table?: { name: string; id: string }; count?: number; records?: Record<string, unknown>[] } | null;
  if (!p?.records) return JSON.stringify(preview, null, 2);
  const cols = ["title", "estimateDays", "start", "end", "dependsOn"].filter((c) => p.records!.some((r) => r[c] !== undefined));
  const cell = (v: unknown) => (v === undefined || v === null ? "" : String(v));
  const width = cols.map((c) => Math.min(60, Math.max(c.length, ...p.records!.map((r) => cell(r[c]).length))));
  const line = (vals: string[]) => vals.map((v, i) => (v.length > width[i]! ? `${v.slice(0, width[i]! - 1)}…` : v.padEnd(width[i]!))).join("  ");
  return [
    `${p.count} records to create in table "${p.table?.name}" (${p.table?.id}):`,
    "",
    `  ${line(cols)}`,
    `  ${line(width.map((w) => "-".repeat(w)))}`,
    ...p.records.map((r) => `  ${line(cols.map((c) => cell(r[c])))}`),
  ].join("\n");
}

async function print(h: { events: AsyncIterable<RunEvent>; result: Promise<RunView> }, out: (s: string) => void): Promise<RunView> {
  for await (const e of h.events) out(formatEvent(e));
  return h.result;
}

export async function demoCommand(opened: OpenedRuntime, args: string[], out: (s: string) => void = console.log): Promise<number> {
  const { runtime, db, tables } = opened;
  if (!tables) throw new Error("the demo needs the QTable pack (openRuntime({ qtable: true }))");
  const access = new PgAccessStore(db);
  await access.ensureWorkspace(DEMO_WORKSPACE);
  const table = await tables.ensureWorkspace(DEMO_WORKSPACE);
  const ctxFlag = args.indexOf("--context");
  const context = {
    goal: DEMO_GOAL,
    table: { id: table.id, name: table.name },
    startDate: nextMonday(),
    holidays: [] as string[],
    ...(ctxFlag >= 0 ? (JSON.parse(args[ctxFlag + 1] ?? "{}") as object) : {}),
  };
  out(`Demo: "${context.goal}"`);
  out(`plan ${path.relative(process.cwd(), DEMO_PLAN_FILE)} · workspace "${DEMO_WORKSPACE}" · table "${table.name}" (${table.id}) · start ${context.startDate} · ${db.kind === "embedded" ? "embedded Postgres" : "Postgres server"}\n`);
  let view = await print(runtime.run(loadDemoPlan(), { workspaceId: DEMO_WORKSPACE, context }), out);
  const pending = view.pendingConfirmations.find((p) => p.stepId === "create");
  if (view.status === "waiting_confirmation" && pending) {
    out(`\nThe run waits for confirmation of step "create" (qtable.task.records.create).\n`);
    out(previewTable(pending.preview));
    const key = await ensureLocalKey(access, db.kind);
    out(`
Approve or reject it (nothing is written until then; the run waits durably, across restarts):
  npm run toolchain -- confirm ${view.runId} create approve      # or: reject
or over HTTP, with the server running (npm start):
  curl -s http://127.0.0.1:8080/api/tool-chains/runs/${view.runId}/confirm \\
    -H "Authorization: Bearer ${key ?? "<your key>"}" -H 'content-type: application/json' \\
    -d '{"stepId": "create", "decision": "approve"}'
`);
    let decision: "approve" | "reject" | undefined = args.includes("--approve") ? "approve" : args.includes("--reject") ? "reject" : undefined;
    if (!decision && process.stdin.isTTY && process.stdout.isTTY) {
      const rl = createInterface({ input: process.stdin, output: process.stdout });
      const a = (await rl.question("Approve now? [y = approve / n = reject / Enter = leave it waiting] ")).trim().toLowerCase();
      rl.close();
      decision = a === "y" || a === "yes" ? "approve" : a === "n" || a === "no" ? "reject" : undefined;
    }
    if (!decision) {
      out(`Left waiting: run ${view.runId}.`);
      return 0;
    }
    out(`\n${decision === "approve" ? "Approving" : "Rejecting"}…`);
    view = await print(await runtime.confirm(view.runId, { stepId: "create", decision }), out);
  }
  out(`\nrun ${view.runId}: ${view.status}${view.error ? ` (${view.error.code}: ${view.error.message})` : ""}`);
  const gantt = view.steps.find((s) => s.stepId === "gantt")?.output as { finish?: string; criticalPath?: string[] } | undefined;
  if (gantt?.finish) out(`finish ${gantt.finish}; critical path: ${gantt.criticalPath?.join(" → ")}`);
  const page = await tables.listRecords(DEMO_WORKSPACE, table.id, { limit: 1_000 });
  out(`table "${table.name}" now holds ${page?.records.length ?? 0} records (GET /api/tables/${table.id}/records)\n`);
  out(view.graph.mermaid);
  return view.status === "completed" || view.status === "waiting_confirmation" ? 0 : 1;
}

/** The local development key (embedded): the same one `npm start` prints; created if none exists. */
async function ensureLocalKey(access: PgAccessStore, kind: "server" | "embedded"): Promise<string | undefined> {
  if (kind !== "embedded") return undefined;
  const file = devKeyFile(process.env.TOOLCHAIN_DATA_DIR ?? ".data/pglite");
  if (!file) return undefined;
  try {
    return readFileSync(file, "utf8").trim();
  } catch {
    if ((await access.countKeys()) > 0) return undefined;
    const { key } = await access.createKey(DEMO_WORKSPACE, { label: "local development" });
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${key}\n`, { mode: 0o600 });
    return key;
  }
}
