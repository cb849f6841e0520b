/**
 * The API's shapes as zod schemas: request bodies and queries are parsed with them, responses are
 * described by them, and /openapi.json is generated from both (src/api/openapi.ts). The tests
 * parse real responses with the response schemas, so the document cannot drift from the server.
 */
import { z } from "zod";
import { PLAN_WARNING_CODES } from "../plan/clamp.js";
import { ActorSchema, ApprovalGivenSchema, ViaSchema } from "../kernel/actor.js";
import { AUTHOR_KINDS, AUTHOR_VIAS, type AuthorKind, type AuthorVia } from "../plan/admission.js";
import { ERROR_CODES } from "../kernel/errors.js";
import { EffectivePolicySchema } from "../kernel/approval-policy.js";
import { EventType } from "../kernel/events.js";
import { RollbackStatus, RunStatus, StepStatus } from "../kernel/status.js";
import { ToolChainPlanSchema, ToolChainStepSchema } from "../plan/schema.js";
import { FALLBACK_REASONS } from "../planner/config.js";
import { ConfirmInputSchema } from "../kernel/decision.js";
import { SkillVersionSchema, VersionChangeSchema } from "../kernel/pending.js";
import { FieldSchema, TableDefinitionSchema } from "../../skills/qtable/fields.js";
import { CalendarSettingSchema } from "../../skills/qtable/calendar.js";

export const RUN_STATUSES = Object.values(RunStatus) as [RunStatus, ...RunStatus[]];
export const RunStatusSchema = z.enum(RUN_STATUSES);

// ---- requests -------------------------------------------------------------------------------

export const RunRequestSchema = z
  .object({
    /** Validated by the runtime, so plan problems answer with their own codes (PLAN_CYCLE, ...). */
    plan: z.unknown().optional().describe("A ToolChainPlan. With `plan`, the plan is validated and run."),
    request: z
      .string()
      .min(1)
      .max(20_000)
      .optional()
      .describe("What to do, in words, for the planner (with `autoPlan: true`)."),
    autoPlan: z
      .boolean()
      .optional()
      .describe(
        "Let the planner write the plan from `request` (the model when configured, else the deterministic fallback planner); the run starts in `planning`.",
      ),
    context: z.unknown().optional().describe("Read by `$ref: context.…` arguments."),
    memory: z.record(z.string(), z.unknown()).optional().describe("Initial chain memory (`$ref: memory.…`)."),
    wait: z
      .boolean()
      .optional()
      .describe("Default true: answer when the run is terminal or waits for confirmation. false: answer 202 at once."),
  })
  .strict();
export type RunRequest = z.infer<typeof RunRequestSchema>;

export const PlanRequestSchema = z
  .object({
    request: z.string().trim().min(1).max(20_000).describe("What to do, in words."),
    context: z
      .unknown()
      .optional()
      .describe("The run's context: its business coordinates (e.g. `table: { id }`) reach the planner."),
    memory: z.record(z.string(), z.unknown()).optional().describe("Initial chain memory the plan may reference."),
  })
  .strict();
export type PlanRequest = z.infer<typeof PlanRequestSchema>;

export const ConfirmRequestSchema = ConfirmInputSchema.extend({
  wait: z
    .boolean()
    .optional()
    .describe("Default true: answer when the run is terminal or waits again. false: answer 202 at once."),
}).strict();
export type ConfirmRequest = z.infer<typeof ConfirmRequestSchema>;

/** Edited arguments to preview before approving (POST /runs/:runId/steps/:stepId/preview): a decision's fields. */
export const PreviewRequestSchema = ConfirmInputSchema.pick({ arguments: true, round: true })
  .required({ arguments: true })
  .strict();

export const CancelRequestSchema = z
  .object({
    reason: z.string().max(2_000).optional(),
    wait: z.boolean().optional().describe("Default true: answer when cancellation and compensation finished."),
  })
  .strict();

const statusList = z.preprocess(
  (v) =>
    v === undefined ? undefined : (Array.isArray(v) ? v : [v]).flatMap((x) => String(x).split(",")).filter(Boolean),
  z.array(RunStatusSchema).optional(),
);
export const ListRunsQuerySchema = z.object({
  status: statusList.describe("Only runs in these statuses (comma-separated or repeated)."),
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: z.string().max(512).optional().describe("`nextCursor` of the previous page."),
});

export const EventsQuerySchema = z.object({
  after: z.coerce.number().int().min(0).default(0).describe("Only events with a greater sequence number."),
});

// ---- responses ------------------------------------------------------------------------------

export const ErrorResponseSchema = z.object({
  error: z.object({
    code: z.enum(ERROR_CODES),
    message: z.string(),
    details: z.unknown().optional(),
  }),
});

const StepErrorSchema = z.looseObject({ code: z.string(), message: z.string(), details: z.unknown().optional() });

export const PlanWarningSchema = z.object({
  code: z.enum(PLAN_WARNING_CODES),
  stepId: z.string().optional(),
  message: z.string(),
});

export const PlannerInfoSchema = z.object({
  kind: z.enum(["llm", "fallback"]).describe("llm: the model wrote the plan; fallback: the deterministic planner did"),
  model: z.string().optional(),
  fallbackReason: z.enum(FALLBACK_REASONS).optional(),
  fallbackDetail: z.string().optional(),
});

const TokenUsageSchema = z.object({
  inputTokens: z.number().int(),
  outputTokens: z.number().int(),
  totalTokens: z.number().int(),
});

export const PlanningRecordSchema = PlannerInfoSchema.extend({
  warnings: z.array(PlanWarningSchema),
  usage: TokenUsageSchema.optional(),
  repairRounds: z.number().int(),
  durationMs: z.number(),
});

const PlanGraphSchema = z.object({
  nodes: z.array(z.object({ id: z.string(), skillName: z.string(), status: z.string().optional() })),
  edges: z.array(z.object({ from: z.string(), to: z.string() })),
  mermaid: z.string(),
});

export const PlanResponseSchema = z.object({
  plan: ToolChainPlanSchema,
  planner: PlannerInfoSchema,
  warnings: z
    .array(PlanWarningSchema)
    .describe("One per change the runtime made to the model's plan (clamps) or note about it"),
  graph: PlanGraphSchema.describe("The plan's DAG: nodes, edges and a Mermaid rendering"),
  usage: TokenUsageSchema.nullable().describe("Tokens the model calls used, when the server reports them"),
  repairRounds: z.number().int(),
  durationMs: z.number(),
  asks: z
    .array(z.string())
    .describe(
      "Steps that will or may wait for a person before their effect (their skill's rule, tightened by the plan, or their fallback skill's)",
    ),
});
export type PlanResponse = z.infer<typeof PlanResponseSchema>;

export const StepViewSchema = z.object({
  stepId: z.string(),
  skillName: z.string(),
  status: z.enum(Object.values(StepStatus) as [StepStatus, ...StepStatus[]]),
  dependsOn: z.array(z.string()),
  attempts: z.number().int(),
  input: z.unknown(),
  output: z.unknown(),
  error: StepErrorSchema.nullable(),
  startedAt: z.string().nullable(),
  finishedAt: z.string().nullable(),
  usedFallback: z.boolean(),
  retrySuppressed: z.string().nullable(),
  rollback: z
    .object({
      status: z.enum(Object.values(RollbackStatus) as [RollbackStatus, ...RollbackStatus[]]),
      error: StepErrorSchema.nullable(),
    })
    .nullable(),
  /** While the step waits for a serial key or resource held by other steps (in any run of the workspace). */
  waitingFor: z.union([z.object({ serialKey: z.string() }), z.object({ resource: z.string() })]).nullable(),
  decision: z
    .object({
      decision: z.enum(["approve", "reject", "mark_done", "skip"]),
      by: ActorSchema.nullable(),
      via: ViaSchema.nullable(),
      at: z.string().nullable(),
      comment: z.string().nullable(),
      approvals: z.array(ApprovalGivenSchema).optional(),
    })
    .nullable()
    .describe(
      "The last decision applied to the step: what, who (`by`), through which surface (`via`), when; a quorum's approvals in order",
    ),
});

const RequesterSchema = ActorSchema.extend({ via: ViaSchema }).describe("Who started the run, through which surface");
export const PendingKindSchema = z.enum(["confirmation", "in_doubt", "compensation"]);

export const PendingConfirmationSchema = z.looseObject({
  stepId: z.string(),
  skillName: z.string(),
  arguments: z.unknown(),
  preview: z.unknown(),
  round: z.number().int().optional(),
  inDoubt: z.boolean().optional(),
  fallback: z
    .boolean()
    .optional()
    .describe("The step's own skill failed; approving runs its fallback skill (skillName) with these arguments"),
  kind: PendingKindSchema.optional().describe("What is being decided (default confirmation)."),
  expiresAt: z
    .string()
    .optional()
    .describe("Under an approval policy with expiresAfterMs: when the wait expires (then onExpiry applies)"),
  onExpiry: z
    .enum(["reject", "leave"])
    .optional()
    .describe("reject: rejected by the runtime; leave: reported, left waiting"),
  versionChanged: VersionChangeSchema.optional().describe(
    "The skill's version changed while the step waited (a deploy): what approving now runs and shows",
  ),
});
const VersionGapSchema = z.object({
  skill: z.string(),
  pinned: SkillVersionSchema,
  available: SkillVersionSchema.nullable().describe("What this process has (null: not registered)"),
});

export const RedriveRecordSchema = z.object({
  n: z.number().int().min(1).describe("1 for the run's first redrive, 2 for the next…"),
  at: z.string(),
  by: ActorSchema,
  via: ViaSchema,
  steps: z.array(z.string()).describe("The steps that ran again"),
  inDoubt: z.array(z.string()).describe("Of those, the non-idempotent ones reconciled (or decided by a person) first"),
  overrides: z
    .record(z.string(), z.record(z.string(), z.object({ from: z.unknown(), to: z.unknown() })))
    .describe("Per step, the argument fields the operator changed"),
});

export const RedriveRequestSchema = z
  .object({
    overrides: z
      .record(z.string(), z.record(z.string(), z.unknown()))
      .optional()
      .describe(
        "Per failed step, argument fields that replace its last attempt's (validated against the skill's input schema; recorded with who changed what)",
      ),
    wait: z.boolean().optional().describe("Default false: answer 202 as soon as the run executes again."),
  })
  .strict();
export type RedriveRequest = z.infer<typeof RedriveRequestSchema>;

export const RunViewSchema = z.object({
  runId: z.string(),
  status: RunStatusSchema,
  traceId: z.string(),
  plan: ToolChainPlanSchema.extend({ steps: z.array(ToolChainStepSchema) }).describe(
    "The plan (no steps while a run started from a request is being planned, or when planning failed).",
  ),
  context: z.unknown(),
  memory: z.record(z.string(), z.unknown()),
  result: z
    .object({ outputs: z.record(z.string(), z.unknown()), memory: z.record(z.string(), z.unknown()) })
    .nullable(),
  error: StepErrorSchema.nullable(),
  steps: z.array(StepViewSchema),
  pendingConfirmations: z.array(PendingConfirmationSchema),
  graph: PlanGraphSchema.describe("The plan's DAG: nodes, edges and a Mermaid rendering coloured by step status."),
  planning: PlanningRecordSchema.nullable().describe(
    "Which planner wrote the plan of a run started from a request, and why the fallback ran; null for a given plan.",
  ),
  admission: z
    .object({
      author: z.object({
        kind: z.enum(AUTHOR_KINDS as [AuthorKind, ...AuthorKind[]]),
        via: z.enum(AUTHOR_VIAS as [AuthorVia, ...AuthorVia[]]),
        mayRelaxConfirmation: z.boolean().optional(),
      }),
      warnings: z.array(PlanWarningSchema),
      requestedBy: RequesterSchema.optional(),
    })
    .nullable()
    .describe(
      "Who wrote the plan (person, model, agent), through which surface, and what admission clamped (model and agent plans may tighten execution semantics, never loosen them)",
    ),
  requestedBy: RequesterSchema.nullable().describe(
    "Who started the run (null: a run recorded before principals existed)",
  ),
  waitingFor: z
    .object({ skillVersion: VersionGapSchema })
    .nullable()
    .describe("Set while no process at hand has a compatible version of a skill the run is pinned to"),
  skillVersions: z
    .record(z.string(), SkillVersionSchema)
    .nullable()
    .describe("The version of each skill the run was planned against (null: not planned yet)"),
  redrives: z
    .array(RedriveRecordSchema)
    .describe("Each redrive of the run, in order (empty when checkpoints were pruned: the event log keeps them)"),
  createdAt: z.string(),
  updatedAt: z.string(),
});

export const PreviewResponseSchema = z.object({
  stepId: z.string(),
  round: z.number().int(),
  skillName: z.string(),
  ok: z.boolean().describe("false: the skill's preview failed for these arguments (`error` says why)"),
  preview: z.unknown().optional(),
  error: StepErrorSchema.optional(),
});

/** Who the caller is (GET /api/me): the console's "signed in as". */
export const MeResponseSchema = z.object({
  workspaceId: z.string(),
  actor: ActorSchema,
  roles: z.array(z.string()).nullable().describe("null: a key without roles (every power)"),
  may: z.object({ start: z.boolean(), cancel: z.boolean(), decide: z.boolean(), redrive: z.boolean() }),
});

/** A waiting step's approval state for the caller (present where an approval policy holds). */
export const ApprovalStateSchema = z.object({
  policy: EffectivePolicySchema,
  required: z.number().int().describe("How many distinct approvals the quorum needs"),
  given: z.array(
    z.object({
      by: ActorSchema.optional(),
      decision: z.enum(["approve", "reject", "mark_done", "skip"]),
      at: z.string().nullable(),
      via: ViaSchema.nullable(),
      comment: z.string().nullable(),
    }),
  ),
  youMayDecide: z.boolean().describe("The caller's roles and the policy admit a decision by them now"),
});

/** One row of GET /api/tool-chains/decisions. */
export const InboxItemSchema = z.object({
  runId: z.string(),
  stepId: z.string(),
  round: z.number().int(),
  skillName: z.string(),
  arguments: z.unknown(),
  preview: z.unknown(),
  requestedBy: RequesterSchema.nullable(),
  runCreatedAt: z.string(),
  approval: ApprovalStateSchema.nullable(),
  youMayDecide: z.boolean(),
});

export const DecisionsQuerySchema = z
  .object({
    mine: z
      .enum(["true", "false"])
      .optional()
      .describe("true: only confirmations the calling principal may decide now"),
  })
  .strict();

export const RunEventSchema = z.object({
  runId: z.string(),
  seq: z.number().int().min(1),
  type: z.enum(Object.values(EventType) as [EventType, ...EventType[]]),
  stepId: z.string().optional(),
  at: z.string(),
  data: z.record(z.string(), z.unknown()),
});

export const EventsResponseSchema = z.object({ events: z.array(RunEventSchema) });

export const RunSummarySchema = z.object({
  runId: z.string(),
  status: RunStatusSchema,
  traceId: z.string(),
  planId: z.string().nullable(),
  goal: z.string().nullable(),
  stepCount: z.number().int(),
  createdAt: z.string(),
  updatedAt: z.string(),
  finishedAt: z.string().nullable(),
});
export const RunListResponseSchema = z.object({ runs: z.array(RunSummarySchema), nextCursor: z.string().nullable() });

export const SkillManifestEntrySchema = z.object({
  name: z.string(),
  description: z.string(),
  inputSchema: z.unknown().describe("JSON Schema of the skill's arguments"),
  outputSchema: z.unknown().optional().describe("JSON Schema of the skill's output"),
  sideEffects: z.enum(["none", "read", "write", "external"]),
  idempotent: z.boolean(),
  parallelSafe: z.boolean(),
  resource: z.object({ name: z.string(), limit: z.number().int(), perSecond: z.number().int().optional() }).optional(),
  requiresConfirmation: z.union([z.boolean(), z.literal("conditional")]),
  compensable: z.boolean(),
  previewable: z.boolean(),
});
export const SkillsResponseSchema = z.object({ skills: z.array(SkillManifestEntrySchema) });

export const HealthResponseSchema = z.object({ status: z.string() });

// ---- tables (skills/qtable) -------------------------------------------------------------------

export const CreateTableRequestSchema = TableDefinitionSchema;

/** Table and record cursors are sequence numbers: decimal, at most Postgres' bigint maximum. */
const SeqCursor = z
  .string()
  .refine((c) => /^\d{1,19}$/.test(c) && BigInt(c) <= 2n ** 63n - 1n, "cursor is the nextCursor of the previous page")
  .optional()
  .describe("`nextCursor` of the previous page.");

export const ListTablesQuerySchema = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(50),
  cursor: SeqCursor,
});

export const ListRecordsQuerySchema = z.object({
  limit: z.coerce.number().int().min(1).max(1_000).default(100),
  cursor: SeqCursor,
});

export const TableSchema = z.object({ id: z.string(), name: z.string(), fields: z.array(FieldSchema) });
export const TableListResponseSchema = z.object({ tables: z.array(TableSchema), nextCursor: z.string().nullable() });
export const RecordListResponseSchema = z.object({
  records: z.array(z.looseObject({ id: z.string() }).describe("`id` and the record's values keyed by field name")),
  nextCursor: z.string().nullable(),
});

// ---- wire types -------------------------------------------------------------------------------
// What a client reads, inferred from the schemas above: the console imports these (type-only), and
// src/api/wire-check.ts checks the runtime's own shapes against them, so a field added on one side
// only fails `npm run typecheck`.

export type WireError = z.output<typeof StepErrorSchema>;
export type WireStepView = z.output<typeof StepViewSchema>;
export type WirePendingConfirmation = z.output<typeof PendingConfirmationSchema>;
export type WirePendingKind = z.output<typeof PendingKindSchema>;
export type WireRunView = z.output<typeof RunViewSchema>;
export type WireRunEvent = z.output<typeof RunEventSchema>;
export type WireRunSummary = z.output<typeof RunSummarySchema>;
export type WireSkill = z.output<typeof SkillManifestEntrySchema>;
export type WirePreview = z.output<typeof PreviewResponseSchema>;
export type WireMe = z.output<typeof MeResponseSchema>;
export type WireInboxItem = z.output<typeof InboxItemSchema>;
export type WireApprovalState = z.output<typeof ApprovalStateSchema>;

/** PUT /api/calendar: the workspace's stored calendar, replaced whole (`{}` clears it). */
export const CalendarRequestSchema = CalendarSettingSchema;
export const CalendarResponseSchema = z.object({
  calendar: CalendarSettingSchema.describe("What the workspace stored"),
  effective: z
    .object({
      workdays: z.array(z.number().int()),
      locale: z.string(),
      holidays: z.array(z.string()),
      timeZone: z.string(),
    })
    .describe("What the Gantt uses with it when a run's context says nothing (the configuration fills the rest)"),
});
