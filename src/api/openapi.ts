/**
 * /openapi.json (OpenAPI 3.1), generated from the zod schemas the routes parse and the response
 * schemas the tests hold the server to (zod 4's own JSON Schema output: OpenAPI 3.1 schemas are
 * JSON Schema 2020-12).
 */
import { z } from "zod";
import { ToolChainPlanSchema } from "../plan/schema.js";
import {
  CancelRequestSchema,
  RedriveRequestSchema,
  ConfirmRequestSchema,
  CreateTableRequestSchema,
  MeResponseSchema,
  PreviewRequestSchema,
  PreviewResponseSchema,
  RecordListResponseSchema,
  TableListResponseSchema,
  CalendarRequestSchema,
  CalendarResponseSchema,
  TableSchema,
  ErrorResponseSchema,
  EventsResponseSchema,
  HealthResponseSchema,
  PlanRequestSchema,
  PlanResponseSchema,
  RunEventSchema,
  RunListResponseSchema,
  RunRequestSchema,
  RunStatusSchema,
  RunViewSchema,
  SkillsResponseSchema,
} from "./schemas.js";

type Meta = { id: string };

function components(entries: [z.ZodType, string][], io: "input" | "output"): Record<string, unknown> {
  const reg = z.registry<Meta>();
  for (const [schema, id] of entries) reg.add(schema, { id });
  const { schemas } = z.toJSONSchema(reg, { io, uri: (id) => `#/components/schemas/${id}`, unrepresentable: "any" });
  for (const s of Object.values(schemas)) {
    delete (s as Record<string, unknown>).$schema;
    delete (s as Record<string, unknown>).$id;
  }
  return schemas;
}

const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
const json = (id: string, description: string) => ({
  description,
  content: { "application/json": { schema: ref(id) } },
});
const sse = {
  description: "text/event-stream of run events: `id:` seq, `event:` type, `data:` a RunEvent as JSON",
  content: { "text/event-stream": { schema: { type: "string" } } },
};
const errors = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((s) => [String(s), json("Error", ERROR_TEXT[s] ?? "error")]));
const ERROR_TEXT: Record<number, string> = {
  400: "invalid request (INVALID_JSON, INVALID_BODY, INVALID_QUERY, INVALID_PATH, VALUE_TOO_LARGE) or plan (PLAN_CYCLE, UNKNOWN_SKILL, SKILL_NOT_ALLOWED, ...)",
  401: "UNAUTHORIZED: missing, unknown or revoked API key (or an invalid sign-in token)",
  403: "ROLE_NOT_ALLOWED (the principal's workspace roles) / NOT_ALLOWED_TO_DECIDE (the step's approval policy)",
  404: "RUN_NOT_FOUND (also for another workspace's run) or NOT_FOUND",
  409: "CONFIRMATION_NOT_PENDING / REQUESTER_CANNOT_APPROVE / RUN_NOT_ACTIVE / TABLE_NAME_TAKEN / QUOTA_EXCEEDED (a workspace quota: tables or records)",
  413: "PAYLOAD_TOO_LARGE",
  415: "UNSUPPORTED_MEDIA_TYPE: send application/json",
  429: "TOO_MANY_REQUESTS for this key (see Retry-After)",
  422: "PLANNING_FAILED: no plan could be written for the request (details.understood says what the fallback planner understood; details.runId names the failed run for /run)",
  503: "NOT_READY",
};
const runId = { name: "runId", in: "path", required: true, schema: { type: "string" } };
const tableId = {
  name: "tableId",
  in: "path",
  required: true,
  schema: { type: "string" },
  description: "the table's id (or its exact name in the workspace)",
};
const tableNotFound = { "404": json("Error", "TABLE_NOT_FOUND (also for another workspace's table)") };
const common = errors(401, 429);
const body = (id: string, required = true) => ({ required, content: { "application/json": { schema: ref(id) } } });
const runResponses = {
  "200": json("RunView", "the run is terminal or waits for confirmation"),
  "202": json("RunView", "accepted (`wait: false`, or still running after the server's wait limit)"),
};

export function openApiDocument(opts: { version?: string; serverUrl?: string } = {}): Record<string, unknown> {
  const requests = components(
    [
      [
        RunRequestSchema.extend({ plan: ToolChainPlanSchema.optional().describe("The plan to validate and run.") }),
        "RunRequest",
      ],
      [PlanRequestSchema, "PlanRequest"],
      [ConfirmRequestSchema, "ConfirmRequest"],
      [CancelRequestSchema, "CancelRequest"],
      [PreviewRequestSchema, "PreviewRequest"],
      [RedriveRequestSchema, "RedriveRequest"],
      [CreateTableRequestSchema, "CreateTableRequest"],
      [CalendarRequestSchema, "CalendarRequest"],
    ],
    "input",
  );
  const responses = components(
    [
      [RunViewSchema, "RunView"],
      [PlanResponseSchema, "PlanResponse"],
      [RunEventSchema, "RunEvent"],
      [EventsResponseSchema, "EventList"],
      [RunListResponseSchema, "RunList"],
      [SkillsResponseSchema, "SkillList"],
      [PreviewResponseSchema, "Preview"],
      [MeResponseSchema, "Me"],
      [ErrorResponseSchema, "Error"],
      [HealthResponseSchema, "Health"],
      [RunStatusSchema, "RunStatus"],
      [TableSchema, "Table"],
      [TableListResponseSchema, "TableList"],
      [RecordListResponseSchema, "RecordList"],
      [CalendarResponseSchema, "Calendar"],
    ],
    "output",
  );
  return {
    openapi: "3.1.0",
    info: {
      title: "toolchain runtime API",
      version: opts.version ?? "0.1.0",
      description: "Run tool-chain plans, follow their events live, confirm and cancel steps.",
    },
    ...(opts.serverUrl ? { servers: [{ url: opts.serverUrl }] } : {}),
    security: [{ bearer: [] }],
    paths: {
      "/api/tool-chains/plan": {
        post: {
          operationId: "plan",
          summary: "Plan a request (nothing runs): the plan, which planner wrote it, the clamps applied and the DAG",
          requestBody: body("PlanRequest"),
          responses: { "200": json("PlanResponse", "a validated plan"), ...errors(400, 413, 415, 422), ...common },
        },
      },
      "/api/tool-chains/run": {
        post: {
          operationId: "run",
          summary: "Validate and run a plan, or plan a request (`autoPlan: true`) and run it",
          requestBody: body("RunRequest"),
          responses: { ...runResponses, ...errors(400, 413, 415, 422), ...common },
        },
      },
      "/api/tool-chains/stream": {
        post: {
          operationId: "stream",
          summary: "Run a plan (or plan a request and run it), streaming its events until it is terminal or waits",
          requestBody: body("RunRequest"),
          responses: { "200": sse, ...errors(400, 413, 415), ...common },
        },
      },
      "/api/tool-chains/decisions": {
        get: {
          operationId: "listDecisions",
          summary:
            "Confirmations waiting in the workspace, oldest run first, each with the caller's approval state (mine=true: only those the caller may decide now)",
          parameters: [
            { name: "mine", in: "query", required: false, schema: { type: "string", enum: ["true", "false"] } },
          ],
          responses: {
            "200": {
              description:
                "{ decisions: [{ runId, stepId, round, skillName, arguments, preview, requestedBy, runCreatedAt, approval, youMayDecide }] }",
              content: { "application/json": { schema: { type: "object" } } },
            },
            ...errors(400),
            ...common,
          },
        },
      },
      "/api/tool-chains/decisions/events": {
        get: {
          operationId: "followDecisions",
          summary:
            "The workspace's decision and wait events, every run on one stream, from now on (Accept: text/event-stream; no resume)",
          responses: { "200": sse, ...errors(400), ...common },
        },
      },
      "/api/tool-chains/runs": {
        get: {
          operationId: "listRuns",
          summary: "The workspace's runs, newest first",
          parameters: [
            {
              name: "status",
              in: "query",
              required: false,
              schema: { type: "string" },
              description: "comma-separated run statuses",
            },
            {
              name: "limit",
              in: "query",
              required: false,
              schema: { type: "integer", minimum: 1, maximum: 100, default: 20 },
            },
            {
              name: "cursor",
              in: "query",
              required: false,
              schema: { type: "string" },
              description: "nextCursor of the previous page",
            },
          ],
          responses: { "200": json("RunList", "a page of runs"), ...errors(400), ...common },
        },
      },
      "/api/tool-chains/runs/{runId}": {
        get: {
          operationId: "getRun",
          summary: "The run view",
          parameters: [runId],
          responses: { "200": json("RunView", "the run"), ...errors(404), ...common },
        },
      },
      "/api/tool-chains/runs/{runId}/events": {
        get: {
          operationId: "runEvents",
          summary:
            "Stored events after `after`; with Accept: text/event-stream, then live until the run is terminal (honours Last-Event-ID)",
          parameters: [
            runId,
            { name: "after", in: "query", required: false, schema: { type: "integer", minimum: 0, default: 0 } },
            {
              name: "Last-Event-ID",
              in: "header",
              required: false,
              schema: { type: "string" },
              description: "SSE resume point (takes precedence over `after`)",
            },
          ],
          responses: {
            "200": {
              description: "events",
              content: {
                "application/json": { schema: ref("EventList") },
                "text/event-stream": sse.content["text/event-stream"],
              },
            },
            "204": { description: "SSE: the run is finished and the client has every event" },
            ...errors(400, 404),
            ...common,
          },
        },
      },
      "/api/tool-chains/runs/{runId}/confirm": {
        post: {
          operationId: "confirm",
          summary: "Decide a step that waits for confirmation; the run resumes",
          parameters: [runId],
          requestBody: body("ConfirmRequest"),
          responses: { ...runResponses, ...errors(400, 403, 404, 409, 413, 415), ...common },
        },
      },
      "/api/tool-chains/runs/{runId}/steps/{stepId}/preview": {
        post: {
          operationId: "previewEdited",
          summary:
            "What approving a waiting confirmation with these arguments would do: validated like the decision, previewed by the skill (nothing is recorded)",
          parameters: [runId, { name: "stepId", in: "path", required: true, schema: { type: "string" } }],
          requestBody: body("PreviewRequest"),
          responses: {
            "200": json("Preview", "the skill's preview for the arguments (ok: false with the error it raised)"),
            ...errors(400, 403, 404, 409, 413, 415),
            ...common,
          },
        },
      },
      "/api/tool-chains/runs/{runId}/cancel": {
        post: {
          operationId: "cancel",
          summary: "Cancel the run (running steps are aborted, completed ones compensated)",
          parameters: [runId],
          requestBody: body("CancelRequest", false),
          responses: { ...runResponses, ...errors(400, 403, 404, 413, 415), ...common },
        },
      },
      "/api/tool-chains/runs/{runId}/redrive": {
        post: {
          operationId: "redrive",
          summary:
            "Run a failed run again from where it failed: completed steps keep their outputs and never run again (operator or admin)",
          parameters: [runId],
          requestBody: body("RedriveRequest", false),
          responses: { ...runResponses, ...errors(400, 403, 404, 409, 413, 415), ...common },
        },
      },
      "/api/me": {
        get: {
          operationId: "me",
          summary: "Who the caller is: workspace, principal, roles and what they may do",
          responses: { "200": json("Me", "the calling principal"), ...common },
        },
      },
      "/api/skills": {
        get: {
          operationId: "skills",
          summary: "The workspace's skill manifest",
          responses: { "200": json("SkillList", "skills this workspace may use"), ...common },
        },
      },
      "/api/tables": {
        get: {
          operationId: "listTables",
          summary: 'The workspace\'s tables, oldest first (its demo "Tasks" table is created on first use)',
          parameters: [
            {
              name: "limit",
              in: "query",
              required: false,
              schema: { type: "integer", minimum: 1, maximum: 100, default: 50 },
            },
            {
              name: "cursor",
              in: "query",
              required: false,
              schema: { type: "string" },
              description: "nextCursor of the previous page",
            },
          ],
          responses: { "200": json("TableList", "a page of tables with their fields"), ...errors(400), ...common },
        },
        post: {
          operationId: "createTable",
          summary: "Create a table with a typed schema (QUOTA_EXCEEDED at the workspace's table quota)",
          requestBody: body("CreateTableRequest"),
          responses: {
            "201": json("Table", "the table (Location: /api/tables/<id>)"),
            ...errors(400, 409, 413, 415),
            ...common,
          },
        },
      },
      "/api/calendar": {
        get: {
          operationId: "getCalendar",
          summary: "The workspace's stored calendar and what the Gantt uses with it",
          responses: { "200": json("Calendar", "the stored and the effective calendar"), ...common },
        },
        put: {
          operationId: "setCalendar",
          summary:
            "Replace the workspace's stored calendar (locale, workdays, holidays, timezone; {} clears it): the Gantt's defaults before the configuration's",
          requestBody: body("CalendarRequest"),
          responses: {
            "200": json("Calendar", "the stored and the effective calendar"),
            ...errors(400, 413, 415),
            ...common,
          },
        },
      },
      "/api/tables/{tableId}": {
        get: {
          operationId: "getTable",
          summary: "A table's schema",
          parameters: [tableId],
          responses: { "200": json("Table", "the table"), ...tableNotFound, ...common },
        },
      },
      "/api/tables/{tableId}/records": {
        get: {
          operationId: "listRecords",
          summary: "A table's records, oldest first",
          parameters: [
            tableId,
            {
              name: "limit",
              in: "query",
              required: false,
              schema: { type: "integer", minimum: 1, maximum: 1000, default: 100 },
            },
            {
              name: "cursor",
              in: "query",
              required: false,
              schema: { type: "string" },
              description: "nextCursor of the previous page",
            },
          ],
          responses: {
            "200": json("RecordList", "a page of records: `{ id, ...values }`"),
            ...errors(400),
            ...tableNotFound,
            ...common,
          },
        },
      },
      "/mcp": {
        post: {
          operationId: "mcp",
          summary: "The MCP endpoint (Streamable HTTP): JSON-RPC requests of an MCP session",
          requestBody: { required: true, content: { "application/json": { schema: { type: "object" } } } },
          responses: {
            "200": {
              description: "a JSON-RPC response, or an event stream of them",
              content: {
                "application/json": { schema: { type: "object" } },
                "text/event-stream": { schema: { type: "string" } },
              },
            },
            "202": { description: "a notification or response accepted" },
            ...errors(400, 404, 413, 415),
            ...common,
          },
        },
        get: {
          operationId: "mcpStream",
          summary: "The MCP session's server-to-client event stream (Mcp-Session-Id header)",
          responses: {
            "200": { description: "server messages", content: { "text/event-stream": { schema: { type: "string" } } } },
            ...errors(400, 404),
            ...common,
          },
        },
        delete: {
          operationId: "mcpEnd",
          summary: "End the MCP session (Mcp-Session-Id header)",
          responses: { "200": { description: "the session is closed" }, ...errors(400, 404), ...common },
        },
      },
      "/healthz": {
        get: {
          operationId: "health",
          summary: "The process is up",
          security: [],
          responses: { "200": json("Health", "up") },
        },
      },
      "/readyz": {
        get: {
          operationId: "ready",
          summary: "The database is reachable",
          security: [],
          responses: { "200": json("Health", "ready"), ...errors(503) },
        },
      },
      "/metrics": {
        get: {
          operationId: "metrics",
          summary: "Prometheus metrics",
          security: [],
          responses: {
            "200": { description: "text exposition format", content: { "text/plain": { schema: { type: "string" } } } },
          },
        },
      },
      "/openapi.json": {
        get: {
          operationId: "openapi",
          summary: "This document",
          security: [],
          responses: {
            "200": { description: "OpenAPI 3.1", content: { "application/json": { schema: { type: "object" } } } },
          },
        },
      },
    },
    components: {
      securitySchemes: {
        bearer: { type: "http", scheme: "bearer", description: "an API key (`toolchain keys create`)" },
      },
      schemas: { ...requests, ...responses },
    },
  };
}
