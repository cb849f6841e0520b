/**
 * `/mcp` on the API's Express app: the MCP Streamable HTTP transport with sessions. Every request
 * carries the workspace API key (the same authenticator as /api, mounted in front of this router);
 * a session belongs to the workspace that opened it, and another workspace's key cannot use it
 * (404, as for an unknown session). Sessions live in this process: behind a load balancer with
 * several API processes, route /mcp by the `Mcp-Session-Id` header (sticky sessions).
 *
 * Sessions are needed (not the stateless mode) because a confirmation asked through elicitation
 * is a server→client request whose answer arrives as a later POST on the same session.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";
import { Router, type Request, type Response } from "express";
import type { AuthInfo } from "@modelcontextprotocol/sdk/server/auth/types.js";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { principalOf } from "../api/auth.js";
import type { Principal } from "../store/access-store.js";
import type { Extra } from "./server.js";

export interface McpHttpOptions {
  /** A new MCP server for a new session. */
  createServer: () => McpServer;
  /** A session without requests for this long is closed. @default 1800000 (30 min) */
  sessionIdleMs?: number;
  /** Open sessions per process; an initialize beyond it answers 503. @default 10000 */
  maxSessions?: number;
}

interface Session {
  transport: StreamableHTTPServerTransport;
  server: McpServer;
  workspaceId: string;
  lastSeen: number;
  /** Requests being answered (an open GET stream counts): such a session is not idle. */
  inFlight: number;
}

export interface McpHttp {
  router: Router;
  sessionCount(): number;
  close(): Promise<void>;
}

/** The principal the authenticator put on the request, as the SDK hands it to tool handlers. */
export function principalFromExtra(extra: Extra): Principal {
  const p = extra.authInfo?.extra?.principal as Principal | undefined;
  if (!p) throw new Error("MCP request without a principal (is the key middleware mounted?)");
  return p;
}

function jsonRpcError(res: Response, status: number, code: number, message: string): void {
  res.status(status).json({ jsonrpc: "2.0", error: { code, message }, id: null });
}

export function mcpHttp(o: McpHttpOptions): McpHttp {
  const sessions = new Map<string, Session>();
  const idleMs = o.sessionIdleMs ?? 1_800_000;
  const maxSessions = o.maxSessions ?? 10_000;

  const closeSession = async (id: string) => {
    const s = sessions.get(id);
    if (!s) return;
    sessions.delete(id);
    await s.server.close().catch(() => undefined);
  };

  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [id, s] of sessions) if (s.inFlight === 0 && now - s.lastSeen > idleMs) void closeSession(id);
  }, Math.min(60_000, idleMs));
  sweep.unref();

  const serve = async (s: Session, req: Request, res: Response) => {
    s.inFlight++;
    s.lastSeen = Date.now();
    res.once("close", () => {
      s.inFlight--;
      s.lastSeen = Date.now();
    });
    await s.transport.handleRequest(req as IncomingMessage & { auth?: AuthInfo }, res, req.body);
  };

  const handle = async (req: Request, res: Response) => {
    const p = principalOf(res);
    // the SDK passes req.auth to tool handlers as extra.authInfo
    (req as { auth?: AuthInfo }).auth = { token: "", clientId: p.keyId, scopes: [], extra: { principal: p } };
    const id = req.get("mcp-session-id");
    if (id !== undefined) {
      const s = sessions.get(id);
      if (!s || s.workspaceId !== p.workspaceId) return jsonRpcError(res, 404, -32001, "Session not found");
      return serve(s, req, res);
    }
    if (req.method !== "POST" || !isInitializeRequest(req.body)) {
      return jsonRpcError(res, 400, -32000, "Bad Request: no Mcp-Session-Id header (send initialize first)");
    }
    if (sessions.size >= maxSessions) return jsonRpcError(res, 503, -32000, "Too many open MCP sessions: retry later");
    const server = o.createServer();
    const session: Session = {
      server,
      workspaceId: p.workspaceId,
      lastSeen: Date.now(),
      inFlight: 0,
      transport: new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => void sessions.set(sid, session),
        onsessionclosed: (sid) => void closeSession(sid),
      }),
    };
    session.transport.onclose = () => {
      const sid = session.transport.sessionId;
      if (sid && sessions.get(sid) === session) sessions.delete(sid);
    };
    await server.connect(session.transport);
    await serve(session, req, res);
  };

  const router = Router();
  router.post("/mcp", handle);
  router.get("/mcp", handle);
  router.delete("/mcp", handle);

  return {
    router,
    sessionCount: () => sessions.size,
    async close() {
      clearInterval(sweep);
      await Promise.all([...sessions.keys()].map(closeSession));
    },
  };
}
