/**
 * /api/tables: the caller's workspace's tables (skills/qtable). Scoped like runs: another
 * workspace's table answers 404 TABLE_NOT_FOUND, indistinguishable from a missing one. The
 * workspace's demo "Tasks" table is created on its first request if it does not exist yet.
 * Tables page like runs (`limit`, `cursor` → `{ tables, nextCursor }`); a workspace has table and
 * record quotas (QUOTA_EXCEEDED) and a table's definition is bounded (VALUE_TOO_LARGE).
 * /api/calendar: the workspace's stored calendar (the Gantt's defaults before the configuration's).
 */
import { Router } from "express";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import type { TableStore } from "../../skills/qtable/store.js";
import type { TableRecord } from "../../skills/qtable/fields.js";
import { workspaceCalendar, type CalendarSetting } from "../../skills/qtable/calendar.js";
import { principalOf } from "./auth.js";
import { parseWith } from "./errors.js";
import {
  CalendarRequestSchema,
  CreateTableRequestSchema,
  ListRecordsQuerySchema,
  ListTablesQuerySchema,
} from "./schemas.js";

const notFound = (id: string) => new ToolchainError(ErrorCode.TABLE_NOT_FOUND, `table ${JSON.stringify(id)} not found`);
const flat = (r: TableRecord) => ({ ...r.values, id: r.id });

/** Ids and names are at most 100 characters of storable text: anything else is no table (not a database error). */
// eslint-disable-next-line no-control-regex
const NO_TABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

export function tablesRouter(tables: TableStore): Router {
  const r = Router();
  const workspace = async (res: Parameters<typeof principalOf>[0]) => {
    const ws = principalOf(res).workspaceId;
    await tables.ensureWorkspace(ws);
    return ws;
  };

  r.param("tableId", (_req, _res, next, id: string) => {
    next(
      id.length <= 200 && !NO_TABLE.test(id)
        ? undefined
        : new ToolchainError(
            ErrorCode.TABLE_NOT_FOUND,
            "tableId: not a table id or name (too long, or holds a NUL character or a lone surrogate)",
          ),
    );
  });

  r.get("/api/tables", async (req, res) => {
    const q = parseWith(ListTablesQuerySchema, req.query, ErrorCode.INVALID_QUERY, "query");
    res.json(await tables.listTables(await workspace(res), { limit: q.limit, cursor: q.cursor }));
  });

  r.post("/api/tables", async (req, res) => {
    const body = parseWith(CreateTableRequestSchema, req.body ?? {}, ErrorCode.INVALID_BODY, "body");
    const t = await tables.createTable(await workspace(res), body);
    res.status(201).setHeader("Location", `/api/tables/${encodeURIComponent(t.id)}`);
    res.json(t);
  });

  r.get("/api/tables/:tableId", async (req, res) => {
    const t = await tables.getTable(await workspace(res), req.params.tableId);
    if (!t) throw notFound(req.params.tableId);
    res.json(t);
  });

  r.get("/api/tables/:tableId/records", async (req, res) => {
    const q = parseWith(ListRecordsQuerySchema, req.query, ErrorCode.INVALID_QUERY, "query");
    const page = await tables.listRecords(await workspace(res), req.params.tableId, {
      limit: q.limit,
      cursor: q.cursor,
    });
    if (!page) throw notFound(req.params.tableId);
    res.json({ records: page.records.map(flat), nextCursor: page.nextCursor });
  });

  // the stored calendar and what the Gantt uses with it (a run's context may still override it)
  const calendarView = (stored: CalendarSetting) => ({
    calendar: stored,
    effective: workspaceCalendar(undefined, process.env, stored),
  });
  r.get("/api/calendar", async (_req, res) => {
    const ws = await workspace(res);
    res.json(calendarView(await tables.getCalendar(ws)));
  });
  r.put("/api/calendar", async (req, res) => {
    const body = parseWith(CalendarRequestSchema, req.body ?? {}, ErrorCode.INVALID_BODY, "body");
    const ws = await workspace(res);
    res.json(calendarView(await tables.setCalendar(ws, body)));
  });

  return r;
}
