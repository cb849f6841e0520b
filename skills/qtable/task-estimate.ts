/**
 * qtable.task.estimate: tasks → three-point estimates (optimistic / likely / pessimistic, the PERT
 * expected value, the half-day `days` the Gantt books, a confidence), from, in order: the model
 * when one is plugged in (validated: every task once, optimistic ≤ likely ≤ pessimistic), the
 * table's own completed rows with similar titles (when `tableId` is given), the task's verb.
 */
import { z } from "zod";
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { defineSkill } from "../../src/skills/contract.js";
import { isUnreadable } from "./model-answer.js";
import { estimateTask, threePoint, type ThreePoint } from "./estimate-heuristics.js";
import { completedRows, historyEstimate, type DoneRow } from "./estimate-history.js";
import { tableFor } from "./schema-describe.js";
import { TableIdSchema, TaskKeySchema, TaskSchema, type Task } from "./schemas.js";
import { MAX_PAGE, type TableStore } from "./store.js";
import type { RecordValues } from "./fields.js";

/** What the model answers per task (`days` alone is read as a single-point estimate). */
const ModelEstimateSchema = z
  .object({
    key: TaskKeySchema,
    optimistic: z.number().positive().max(10_000).optional(),
    likely: z.number().positive().max(10_000).optional(),
    pessimistic: z.number().positive().max(10_000).optional(),
    days: z.number().positive().max(10_000).optional(),
    confidence: z.number().min(0).max(1).optional(),
  })
  .refine((e) => e.likely !== undefined || e.days !== undefined, "each estimate needs likely (or days)")
  .refine(
    (e) => (e.optimistic ?? 0) <= (e.likely ?? e.days!) && (e.likely ?? e.days!) <= (e.pessimistic ?? Infinity),
    "optimistic ≤ likely ≤ pessimistic",
  );
export const ModelEstimatesSchema = z.array(ModelEstimateSchema).min(1).max(1_000);
/** The shape the model is asked for (its JSON Schema; the checks above are the skill's). */
export const ModelEstimateListSchema = z.object({
  estimates: z
    .array(
      z.object({
        key: TaskKeySchema,
        optimistic: z.number().describe("Working days if all goes well"),
        likely: z.number().describe("Working days most likely"),
        pessimistic: z.number().describe("Working days if it goes badly (≥ likely ≥ optimistic)"),
        confidence: z.number().min(0).max(1).optional().describe("How sure, 0 to 1"),
      }),
    )
    .min(1)
    .max(1_000),
});

/**
 * The seam for a model: one estimate per task; checked by the skill, never trusted. `repair`
 * carries the previous answer's problems on the second call; throwing `UnreadableAnswer`
 * (model-answer.ts) means "not JSON of the shape" (repaired), anything else "no answer".
 */
export type EstimateWith = (tasks: Task[], signal: AbortSignal, repair?: { problems: string }) => Promise<unknown>;

export const ESTIMATE_SOURCES = ["model", "history", "heuristic"] as const;
export type EstimateSource = (typeof ESTIMATE_SOURCES)[number];
export type Estimate = ThreePoint & { source: EstimateSource; basis?: string[] };

export const EstimateInputSchema = z
  .object({
    tasks: z.array(TaskSchema).min(1).max(1_000),
    tableId: TableIdSchema.optional().describe(
      "A table whose completed rows (status done, with start/end or an estimate) calibrate the estimates of similar tasks",
    ),
  })
  .strict();
const Points = {
  optimistic: z.number().positive(),
  likely: z.number().positive(),
  pessimistic: z.number().positive(),
  expected: z.number().positive(),
};
export const EstimateOutputSchema = z.object({
  estimates: z.array(
    z.object({
      key: TaskKeySchema,
      days: z.number().positive(),
      ...Points,
      confidence: z.number().min(0).max(1),
      source: z.enum(ESTIMATE_SOURCES),
      basis: z.array(z.string()).optional(),
    }),
  ),
  warnings: z.array(z.string()),
});

/** At most this many rows of history are read (newest pages are not preferred: insertion order). */
const MAX_HISTORY_ROWS = 5_000;

async function readHistory(store: TableStore, workspaceId: string, tableId: string): Promise<DoneRow[]> {
  const table = await tableFor(store, workspaceId, tableId);
  const rows: RecordValues[] = [];
  let cursor: string | undefined;
  do {
    const page = await store.listRecords(workspaceId, table.id, { limit: MAX_PAGE, cursor });
    if (!page) break;
    rows.push(...page.records.map((r) => r.values));
    cursor = page.nextCursor ?? undefined;
  } while (cursor && rows.length < MAX_HISTORY_ROWS);
  return completedRows(table, rows);
}

function fromModel(
  raw: unknown,
  tasks: readonly Task[],
): { ok: true; estimates: Estimate[] } | { ok: false; problem: string } {
  const list = raw && typeof raw === "object" && !Array.isArray(raw) ? (raw as { estimates?: unknown }).estimates : raw;
  const parsed = ModelEstimatesSchema.safeParse(list);
  if (!parsed.success) return { ok: false, problem: z.prettifyError(parsed.error).replace(/\n/g, "; ") };
  const byKey = new Map<string, z.infer<typeof ModelEstimateSchema>>();
  for (const e of parsed.data) {
    if (byKey.has(e.key)) return { ok: false, problem: `task "${e.key}" estimated twice` };
    byKey.set(e.key, e);
  }
  const missing = tasks.filter((t) => !byKey.has(t.key)).map((t) => t.key);
  const extra = [...byKey.keys()].filter((k) => !tasks.some((t) => t.key === k));
  if (missing.length || extra.length)
    return {
      ok: false,
      problem: `every task exactly once (missing: ${missing.join(", ") || "none"}; unknown: ${extra.join(", ") || "none"})`,
    };
  return {
    ok: true,
    estimates: tasks.map((t) => {
      const e = byKey.get(t.key)!;
      const m = e.likely ?? e.days!;
      return {
        ...threePoint(t.key, e.optimistic ?? m, m, e.pessimistic ?? m, e.confidence ?? 0.6),
        source: "model" as const,
      };
    }),
  };
}

/** The model's estimates: one repair round naming the problems, else why not (for the warning). */
async function askModel(
  estimateWith: EstimateWith,
  tasks: Task[],
  signal: AbortSignal,
): Promise<{ ok: true; estimates: Estimate[] } | { ok: false; problem: string }> {
  let problem: string | undefined;
  for (const round of [0, 1]) {
    try {
      const got = fromModel(
        await estimateWith(tasks, signal, problem === undefined ? undefined : { problems: problem }),
        tasks,
      );
      if (got.ok) return got;
      problem = got.problem;
    } catch (e) {
      if (signal.aborted) throw e; // cancelled or timed out: not a model problem
      if (!isUnreadable(e))
        return { ok: false, problem: `the model did not answer (${(e as Error).message.slice(0, 300)})` };
      problem = e.message;
    }
    if (round === 1) break;
  }
  return { ok: false, problem: `the model's estimates were invalid twice (last: ${problem!.slice(0, 300)})` };
}

export function taskEstimateSkill(opts: { store?: TableStore; estimateWith?: EstimateWith } = {}) {
  const order = [
    opts.estimateWith
      ? "the configured model (validated: every task once, optimistic ≤ likely ≤ pessimistic; one repair round)"
      : undefined,
    opts.store ? "the actual durations of completed rows with similar titles in `tableId`, when given" : undefined,
    "heuristics on each task's leading verb (research, design, build, verify, document, coordinate, release, close)",
  ].filter(Boolean);
  return defineSkill({
    name: "qtable.task.estimate",
    description: `Three-point estimates per task in working days: optimistic, likely, pessimistic, the PERT expected value, \`days\` (expected rounded up to a half day, what the Gantt books) and a confidence in [0, 1]; each says its source. Sources, first that answers: ${order.join("; then ")}.${opts.estimateWith ? " A model answer still invalid after one repair round falls back, with a warning." : " No model is used."} Duplicate task keys fail with INVALID_INPUT.`,
    input: EstimateInputSchema,
    output: EstimateOutputSchema,
    // reads the table's history when given one
    sideEffects: opts.store ? "read" : "none",
    idempotent: true,
    estimateDurationMs: () => (opts.estimateWith ? 5_000 : 1),
    async execute(args, ctx) {
      const keys = args.tasks.map((t) => t.key);
      if (new Set(keys).size !== keys.length)
        throw new ToolchainError(
          ErrorCode.INVALID_INPUT,
          `duplicate task keys: ${[...new Set(keys.filter((k, i) => keys.indexOf(k) !== i))].join(", ")}`,
          { effectStarted: false, details: { field: "tasks" } },
        );
      const warnings: string[] = [];
      if (opts.estimateWith) {
        const got = await askModel(opts.estimateWith, args.tasks, ctx.signal);
        if (got.ok) return { estimates: got.estimates, warnings };
        warnings.push(`${got.problem}; estimated from history and heuristics instead`);
      }
      let done: DoneRow[] = [];
      if (args.tableId) {
        if (!opts.store) warnings.push("no table store: tableId ignored");
        else done = await readHistory(opts.store, ctx.workspaceId, args.tableId);
      }
      const estimates: Estimate[] = args.tasks.map((t) => {
        const h = historyEstimate(t, done);
        return h ? { ...h, source: "history" as const } : { ...estimateTask(t), source: "heuristic" as const };
      });
      if (args.tableId && opts.store && !estimates.some((e) => e.source === "history"))
        warnings.push(`table ${args.tableId} has no completed rows like these tasks: heuristics only`);
      return { estimates, warnings };
    },
  });
}
