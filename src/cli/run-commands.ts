/**
 * The commands about runs, locally or on a server (`--url`): run, approve, reject, confirm,
 * cancel, runs, show. Each draws live progress (tree on a terminal, lines when piped) or, with
 * `--json`, prints one JSON document; the exit code says how the run ended (see exit.ts).
 */
import { readFileSync } from "node:fs";
import { Argument, type Command } from "commander";
import { RunStatus } from "../kernel/status.js";
import type { ConfirmInput } from "../kernel/decision.js";
import type { RunView } from "../kernel/run-view.js";
import type { Backend, Execution } from "./backend.js";
import { connectionHint, ioFor, printJson, withBackend, type Ctx, type Register } from "./context.js";
import { Exit, jsonArg, jsonObjectArg, usage, type ExitCode } from "./exit.js";
import { esc } from "./escape.js";
import { follow, outputLines, settle } from "./flow.js";
import { RunModel } from "./model.js";
import { runsTable, showLines } from "./render.js";
import { registerMigrate } from "./migrate.js";

export type { Register } from "./context.js";

/** A plan from a file, `-` (stdin) or inline JSON. */
function readPlan(arg: string): unknown {
  if (arg === "-") {
    try {
      return JSON.parse(readFileSync(0, "utf8"));
    } catch (e) {
      throw usage(`plan on stdin: not valid JSON (${(e as Error).message})`);
    }
  }
  const v = jsonArg(arg.trim().startsWith("{") ? arg : `@${arg}`, "plan");
  // `toolchain plan --json` prints { plan, planner, … }: accept it as is
  return v && typeof v === "object" && "plan" in v && "planner" in v ? (v as { plan: unknown }).plan : v;
}

function statusList(v: string | undefined): RunStatus[] | undefined {
  if (!v) return undefined;
  const all = Object.values(RunStatus) as string[];
  const list = v
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = list.filter((s) => !all.includes(s));
  if (bad.length) throw usage(`--status: unknown status ${bad.join(", ")} (one of ${all.join(", ")})`);
  return list as RunStatus[];
}

const width = (ctx: Ctx) => (ctx.stdout.columns && ctx.stdout.columns > 20 ? ctx.stdout.columns - 1 : 160);

/** The end of every run command: the JSON view, or the outputs of a finished run (the summary is printed by settle). */
function finish(ctx: Ctx, view: RunView, exit: ExitCode): number {
  if (ctx.json) printJson(ctx, view);
  else if (view.status === "completed") for (const l of outputLines(view, width(ctx))) ctx.out(l);
  return exit;
}

async function runCommand(ctx: Ctx, planArg: string | undefined, o: Record<string, unknown>): Promise<number> {
  const request = o.request as string | undefined;
  if (planArg === undefined && request === undefined)
    throw usage('run: give a plan file (toolchain run plan.json) or --request "…"');
  if (planArg !== undefined && request !== undefined) throw usage("run: give a plan file or --request, not both");
  if (request !== undefined && !request.trim()) throw usage("--request: say what to do");
  const plan = planArg !== undefined ? readPlan(planArg) : undefined;
  const context = jsonArg(o.context as string | undefined, "--context");
  const memory = jsonObjectArg(o.memory as string | undefined, "--memory");
  return withBackend(ctx, o.workspace as string | undefined, async (b) => {
    const exec = await b.start({ ...(request !== undefined ? { request } : { plan }), context, memory });
    const model = new RunModel(exec.runId, "queued");
    if (plan && typeof plan === "object" && Array.isArray((plan as { steps?: unknown }).steps))
      model.setPlan(plan as Parameters<RunModel["setPlan"]>[0]);
    const { view, exit } = await settle(b, exec, model, ioFor(ctx, o.input === false), { yes: Boolean(o.yes) });
    return finish(ctx, view, exit);
  });
}

/** approve / reject / confirm: one decision, then follow the run like `run` does. */
async function decide(ctx: Ctx, runId: string, input: ConfirmInput, o: Record<string, unknown>): Promise<number> {
  return withBackend(ctx, undefined, async (b) => {
    const model = RunModel.fromView(await b.getRun(runId));
    const exec = await b.confirm(runId, input);
    const io = ioFor(ctx, o.input === false);
    if (!ctx.json) io.out(esc(`${input.decision} "${input.stepId}" of run ${runId}`));
    const { view, exit } = await settle(b, exec, model, io, { yes: Boolean(o.yes) });
    return finish(ctx, view, exit);
  });
}

async function cancelCommand(ctx: Ctx, runId: string, o: Record<string, unknown>): Promise<number> {
  return withBackend(ctx, undefined, async (b) => {
    const model = RunModel.fromView(await b.getRun(runId));
    const io = ioFor(ctx, true);
    const exec: Execution = await b.cancel(runId, o.reason as string | undefined);
    const view = await follow(exec, model, io, b.where);
    if (ctx.json) printJson(ctx, view);
    else
      ctx.out(
        esc(
          `run ${view.runId} ${view.status.replace(/_/g, " ")}${view.error ? ` · ${view.error.code}: ${view.error.message}` : ""}`,
        ),
      );
    // the cancel was carried out (a run that had already ended stays as it was)
    return Exit.ok;
  });
}

async function redriveCommand(ctx: Ctx, runId: string, o: Record<string, unknown>): Promise<number> {
  const overrides = jsonObjectArg(o.overrides as string | undefined, "--overrides") as
    Record<string, Record<string, unknown>> | undefined;
  return withBackend(ctx, undefined, async (b) => {
    const model = RunModel.fromView(await b.getRun(runId));
    const exec = await b.redrive(runId, overrides);
    if (!ctx.json) ctx.out(esc(`redriving run ${runId}`));
    const { view, exit } = await settle(b, exec, model, ioFor(ctx, o.input === false), { yes: Boolean(o.yes) });
    return finish(ctx, view, exit);
  });
}

async function showCommand(ctx: Ctx, b: Backend, runId: string): Promise<number> {
  const view = await b.getRun(runId);
  const events = await b.events(runId, 0);
  if (ctx.json) {
    printJson(ctx, { ...view, events });
    return Exit.ok;
  }
  const model = RunModel.fromHistory(view, events);
  for (const l of showLines(view, events, model, { ...ctx.style, width: width(ctx), now: Date.now() })) ctx.out(l);
  return Exit.ok;
}

const decisionOptions = (c: Command) =>
  c
    .option("--arguments <json|file>", "replace the step's arguments (inline JSON, @file or a file path)")
    .option("--comment <text>", "why (kept with the decision and in the step_confirmed event)")
    .option("-y, --yes", "approve every later confirmation of this run")
    .option("--no-input", "never ask: leave later confirmations waiting (exit 3)");

export function registerRunCommands(program: Command, register: Register): void {
  register(
    program
      .command("run")
      .summary("run a plan (or a request) with live progress")
      .description(
        "Run a plan file (or `-` for stdin, or inline JSON), or a request the planner turns into a plan, drawing its steps as they run. At a confirmation it shows the preview and resolved arguments and asks, on a terminal.",
      )
      .argument("[plan]", "plan file (JSON), - for stdin")
      .option("-r, --request <text>", "plan this request and run it (the run starts in planning)")
      .option("--context <json|file>", "the run's context, read by $ref: context.… (inline JSON, @file or a file path)")
      .option("--memory <json|file>", "initial chain memory")
      .option("--workspace <id>", 'workspace of the run (local only; default TOOLCHAIN_WORKSPACE or "local")')
      .option("-y, --yes", "approve every confirmation")
      .option("--no-input", "never ask: exit 3 at a confirmation and print how to decide later"),
    (ctx, [plan], o) => runCommand(ctx, plan as string | undefined, o),
  );
  for (const decision of ["approve", "reject"] as const) {
    register(
      decisionOptions(
        program
          .command(decision)
          .summary(`${decision} a step waiting for confirmation, then follow the run`)
          .argument("<runId>")
          .argument("<stepId>"),
      ),
      (ctx, [runId, stepId], o) =>
        decide(ctx, runId as string, { stepId: stepId as string, decision, ...decisionInput(o) }, o),
    );
  }
  register(
    decisionOptions(
      program
        .command("confirm")
        .summary("decide a waiting step: approve, reject, mark_done (a step in doubt), skip (a failed compensation)")
        .argument("<runId>")
        .argument("<stepId>")
        .addArgument(new Argument("<decision>").choices(["approve", "reject", "mark_done", "skip"]))
        .option("--output <json|file>", "mark_done: the output to record for the step"),
    ),
    (ctx, [runId, stepId, decision], o) => {
      const output = jsonArg(o.output as string | undefined, "--output");
      return decide(
        ctx,
        runId as string,
        {
          stepId: stepId as string,
          decision: decision as ConfirmInput["decision"],
          ...decisionInput(o),
          ...(output !== undefined ? { output } : {}),
        },
        o,
      );
    },
  );
  register(
    program
      .command("cancel")
      .summary("cancel a run (running steps are aborted, completed ones compensated)")
      .argument("<runId>")
      .option("--reason <text>", "recorded with the cancellation"),
    (ctx, [runId], o) => cancelCommand(ctx, runId as string, o),
  );
  register(
    program
      .command("redrive")
      .summary("run a failed run again from where it failed (completed steps are not run again)")
      .argument("<runId>")
      .option(
        "--overrides <json>",
        'per failed step, argument fields to change: \'{"b": {"region": "us"}}\' (checked against the skill)',
      )
      .option("-y, --yes", "approve every later confirmation of this run")
      .option("--no-input", "never ask: leave later confirmations waiting (exit 3)"),
    (ctx, [runId], o) => redriveCommand(ctx, runId as string, o),
  );
  const runs = register(
    program
      .command("runs")
      .summary("list runs, newest first")
      .option("--status <list>", "only these statuses, comma-separated (e.g. waiting_confirmation,failed)")
      .option("--limit <n>", "how many (1-100)", "20")
      .option("--cursor <cursor>", "the next page (printed after a full page)")
      .option("--workspace <id>", 'local only: the workspace to list (default TOOLCHAIN_WORKSPACE or "local")'),
    (ctx, _args, o) =>
      withBackend(ctx, o.workspace as string | undefined, async (b) => {
        const limit = Number(o.limit);
        if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw usage("--limit: a whole number from 1 to 100");
        const page = await b.listRuns({
          statuses: statusList(o.status as string | undefined),
          limit,
          ...(o.cursor ? { cursor: o.cursor as string } : {}),
        });
        if (ctx.json) printJson(ctx, page);
        else {
          for (const l of runsTable(page.runs, ctx.style)) ctx.out(l);
          if (page.nextCursor)
            ctx.out(
              `more: toolchain runs --cursor ${page.nextCursor}${o.status ? ` --status ${String(o.status)}` : ""}${connectionHint(ctx) ? ` ${connectionHint(ctx)}` : ""}`,
            );
        }
        return Exit.ok;
      }),
  );
  registerMigrate(runs, register);
  register(
    program
      .command("audit")
      .summary("a run's event log (who started, decided, cancelled: `by`, `via`) as JSON lines, for an audit trail")
      .argument("<runId>"),
    (ctx, [runId]) =>
      withBackend(ctx, undefined, async (b) => {
        // every event, one JSON object a line, in order: the log is the audit trail
        let after = 0;
        for (;;) {
          const page = await b.events(runId as string, after);
          for (const e of page) {
            const { key: _key, ...event } = e as typeof e & { key?: string };
            ctx.out(JSON.stringify(event));
          }
          if (!page.length || page[page.length - 1]!.seq <= after) break;
          after = page[page.length - 1]!.seq;
        }
        return Exit.ok;
      }),
  );
  register(
    program
      .command("show")
      .summary("a run: its steps, a timeline of each step's start and end, its events")
      .argument("<runId>"),
    (ctx, [runId]) => withBackend(ctx, undefined, (b) => showCommand(ctx, b, runId as string)),
  );
}

function decisionInput(o: Record<string, unknown>): Pick<ConfirmInput, "arguments" | "comment"> {
  const args = jsonObjectArg(o.arguments as string | undefined, "--arguments");
  return { ...(args ? { arguments: args } : {}), ...(o.comment !== undefined ? { comment: o.comment as string } : {}) };
}
