/**
 * `/mcp` on the API's Express app: the MCP Streamable HTTP transport with sessions. Every request
 * carries the workspace API key (the same authenticator as /api, mounted in front of this router);
 * a session belongs to the workspace that opened it, and another workspace's key cannot use it
 * (404, as for an unknown session). Sessions live in this process: behind a load balancer with
 * several API processes, route /mcp by the `Mcp-Session-Id` header (sticky sessions).
 *
 * Sessions are needed (not the stateless mode) because a confirmation asked through elicitation
 * is a server→client request whose answer arrives as a later POST on the same session.
 *
 * Bounds: sessions per key, per workspace and per process (src/mcp/session-quota.ts: over a quota
 * the key's own oldest idle session is closed first); an open GET stream takes one of the key's
 * event-stream slots (the same StreamSlots as the REST event streams) and does not keep its
 * session alive: a session without requests for `sessionIdleMs` is closed, stream and all.
 * JSON-RPC batches are refused (MCP 2025-06-18 dropped them): one HTTP request is one JSON-RPC
 * request, so the key's request budget counts every call.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { Router, type Request, type Response } from "express";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { principalOf } from "../api/auth.js";
import { StreamSlots } from "../api/stream-slots.js";
import type { Principal } from "../store/access-store.js";
import type { Extra } from "./server.js";
import { admitSession, DEFAULT_SESSION_QUOTAS } from "./session-quota.js";

export interface McpHttpOptions {
  /** A new MCP server for a new session. */
  createServer: () => McpServer;
  /** A session without requests for this long is closed. @default 1800000 (30 min) */
  sessionIdleMs?: number;
  /** Open sessions per process; an initialize beyond it (and none of the key's own idle to close) answers 503. @default 10000 */
  maxSessions?: number;
  /** Open sessions per API key; beyond it the key's oldest idle session is closed, else 429. @default 100 */
  maxSessionsPerKey?: number;
  /** Open sessions per workspace; beyond it the key's (then the workspace's) oldest idle session is closed, else 429. @default 1000 */
  maxSessionsPerWorkspace?: number;
  /** Open event streams per key, shared with the REST event streams. @default a quota of 20 of its own */
  streamSlots?: StreamSlots;
}

interface Session {
  id: string;
  transport: StreamableHTTPServerTransport;
  server: McpServer;
  keyId: string;
  workspaceId: string;
  lastSeen: number;
  /** Requests being answered, open GET streams not counted: such a session is not idle. */
  busy: number;
}

export interface McpHttp {
  router: Router;
  sessionCount(): number;
  /** Open GET streams (server→client messages). */
  openStreams(): number;
  close(): Promise<void>;
}

/** The principal the authenticator put on the request, as the SDK hands it to tool handlers. */
export function principalFromExtra(extra: Extra): Principal {
  const p = extra.authInfo?.extra?.principal as Principal | undefined;
  if (!p) throw new Error("MCP request without a principal (is the key middleware mounted?)");
  return p;
}

function jsonRpcError(res: Response, status: number, code: number, message: string, data?: unknown): void {
  res
    .status(status)
    .json({ jsonrpc: "2.0", error: { code, message, ...(data !== undefined ? { data } : {}) }, id: null });
}

export function mcpHttp(o: McpHttpOptions): McpHttp {
  const sessions = new Map<string, Session>();
  /** Sessions whose initialize is being answered (not yet in `sessions`). */
  const reserved = new Map<string, Session>();
  const idleMs = o.sessionIdleMs ?? 1_800_000;
  const quotas = {
    total: o.maxSessions ?? DEFAULT_SESSION_QUOTAS.total,
    perKey: o.maxSessionsPerKey ?? DEFAULT_SESSION_QUOTAS.perKey,
    perWorkspace: o.maxSessionsPerWorkspace ?? DEFAULT_SESSION_QUOTAS.perWorkspace,
  };
  const slots = o.streamSlots ?? new StreamSlots(20);
  let streams = 0;

  const closeSession = async (id: string) => {
    const s = sessions.get(id);
    if (!s) return;
    sessions.delete(id);
    await s.server.close().catch(() => undefined);
  };

  // an open GET stream does not make a session busy: a client that only listens is idle
  const sweep = setInterval(
    () => {
      const now = Date.now();
      for (const [id, s] of sessions) if (s.busy === 0 && now - s.lastSeen > idleMs) void closeSession(id);
    },
    Math.min(60_000, idleMs),
  );
  sweep.unref();

  const serve = async (s: Session, req: Request, res: Response) => {
    s.lastSeen = Date.now();
    if (req.method === "GET") {
      // the server→client stream: one of the key's event-stream slots while it is open
      let release: () => void;
      try {
        release = slots.acquire(s.keyId);
      } catch (e) {
        return jsonRpcError(res, 429, -32000, (e as Error).message, { code: "TOO_MANY_STREAMS" });
      }
      streams++;
      res.once("close", () => {
        streams--;
        release();
      });
    } else {
      s.busy++;
      res.once("close", () => {
        s.busy--;
        s.lastSeen = Date.now();
      });
    }
    await s.transport.handleRequest(req as IncomingMessage & { auth?: AuthInfo }, res, req.body);
  };

  const handle = async (req: Request, res: Response) => {
    const p = principalOf(res);
    // the SDK passes req.auth to tool handlers as extra.authInfo
    (req as { auth?: AuthInfo }).auth = { token: "", clientId: p.keyId, scopes: [], extra: { principal: p } };
    if (Array.isArray(req.body)) {
      // a batch would run many calls for one request of the key's budget; MCP 2025-06-18 dropped batching
      return jsonRpcError(
        res,
        400,
        -32600,
        "Invalid Request: JSON-RPC batches are not supported; send one request per HTTP POST",
      );
    }
    const id = req.get("mcp-session-id");
    if (id !== undefined) {
      const s = sessions.get(id);
      if (!s || s.workspaceId !== p.workspaceId) return jsonRpcError(res, 404, -32001, "Session not found");
      return serve(s, req, res);
    }
    if (req.method !== "POST" || !isInitializeRequest(req.body)) {
      return jsonRpcError(res, 400, -32000, "Bad Request: no Mcp-Session-Id header (send initialize first)");
    }
    // sessions being initialized count too (never evicted): a burst of initializes cannot pass the quota together
    const opening = [...reserved.values()].map((r) => ({ ...r, busy: 1 }));
    const admission = admitSession(
      [...sessions.values(), ...opening],
      { keyId: p.keyId, workspaceId: p.workspaceId },
      quotas,
    );
    if (!admission.ok) {
      const what = admission.scope === "process" ? "this server" : `this ${admission.scope}`;
      const status = admission.scope === "process" ? 503 : 429;
      return jsonRpcError(
        res,
        status,
        -32000,
        `Too many open MCP sessions for ${what} (the limit is ${admission.limit}, none idle to close): close one (DELETE /mcp) or retry later`,
        { code: "TOO_MANY_SESSIONS", scope: admission.scope, limit: admission.limit },
      );
    }
    const server = o.createServer();
    const reservation = `opening:${randomUUID()}`;
    const session: Session = {
      id: reservation,
      server,
      keyId: p.keyId,
      workspaceId: p.workspaceId,
      lastSeen: Date.now(),
      busy: 0,
      transport: new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => {
          reserved.delete(reservation);
          session.id = sid;
          sessions.set(sid, session);
        },
        onsessionclosed: (sid) => void closeSession(sid),
      }),
    };
    session.transport.onclose = () => {
      const sid = session.transport.sessionId;
      if (sid && sessions.get(sid) === session) sessions.delete(sid);
    };
    reserved.set(reservation, session); // before the first await: counted by the next admission
    try {
      await Promise.all(admission.evict.map(closeSession));
      await server.connect(session.transport);
      await serve(session, req, res);
    } finally {
      reserved.delete(reservation);
    }
  };

  const router = Router();
  router.post("/mcp", handle);
  router.get("/mcp", handle);
  router.delete("/mcp", handle);

  return {
    router,
    sessionCount: () => sessions.size,
    openStreams: () => streams,
    async close() {
      clearInterval(sweep);
      await Promise.all([...sessions.keys()].map(closeSession));
    },
  };
}
