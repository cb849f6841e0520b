/**
 * The MCP server over stdio, for local clients that launch servers as commands (Claude Desktop,
 * Cursor, the MCP Inspector): the same tools and RunService as /mcp, in one workspace's name.
 * stdout carries the protocol: everything else this process says goes to stderr.
 *
 * Which workspace: `TOOLCHAIN_API_KEY` (a workspace key, checked like over HTTP), else
 * `--workspace <id>` / `TOOLCHAIN_WORKSPACE`, else "local" (the embedded default's workspace,
 * created when missing). The workspace's skill allowlist applies.
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { RunService } from "../service/run-service.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { openLive } from "../live/index.js";
import { openRuntime } from "../runtime/open.js";
import type { Principal } from "../store/access-store.js";
import { PgAccessStore } from "../store/pg-access-store.js";
import { createToolchainMcpServer } from "./server.js";

export interface StdioOptions {
  workspace?: string;
  apiKey?: string;
  elicitationTimeoutMs?: number;
  /** How long run_tool_chain / confirm wait for a run before answering with its current state. @default 300000 */
  maxWaitMs?: number;
}

async function principalFor(access: PgAccessStore, o: StdioOptions): Promise<Principal> {
  if (o.apiKey) {
    const p = await access.authenticate(o.apiKey);
    if (!p) throw new ToolchainError(ErrorCode.UNAUTHORIZED, "TOOLCHAIN_API_KEY: unknown or revoked API key");
    return p;
  }
  const id = o.workspace ?? "local";
  const ws = (await access.getWorkspace(id)) ?? (id === "local" ? await access.ensureWorkspace("local") : undefined);
  if (!ws)
    throw new ToolchainError(
      ErrorCode.NOT_FOUND,
      `workspace "${id}" not found (create it with: toolchain keys create --workspace ${id})`,
    );
  return { workspaceId: ws.workspaceId, keyId: "stdio", allowedSkills: ws.allowedSkills };
}

/** Serves until stdin closes or a signal arrives; resolves then, after a clean shutdown. */
export async function serveMcpStdio(o: StdioOptions = {}): Promise<void> {
  const opened = await openRuntime();
  const { runtime, db } = opened;
  const live = await openLive({ store: runtime.store, db, redisUrl: process.env.REDIS_URL || undefined });
  // an embedded database belongs to this process: it also finishes runs a previous process left
  const stopWorker = db.kind === "embedded" ? runtime.startWorker({ pollMs: 1_000 }) : async () => undefined;
  try {
    const principal = await principalFor(new PgAccessStore(db), o);
    const service = new RunService({
      runtime,
      feeds: live.feeds,
      cache: live.cache,
      execution: "inline",
      maxWaitMs: o.maxWaitMs ?? 300_000,
    });
    const server = createToolchainMcpServer({
      service,
      feeds: live.feeds,
      principal: () => principal,
      elicitationTimeoutMs: o.elicitationTimeoutMs,
    });
    const transport = new StdioServerTransport();
    const closed = new Promise<void>((resolve) => {
      transport.onclose = resolve;
      process.stdin.once("end", resolve);
      process.once("SIGINT", resolve);
      process.once("SIGTERM", resolve);
    });
    await server.connect(transport);
    console.error(
      `toolchain MCP server on stdio (workspace "${principal.workspaceId}", ${db.kind === "server" ? "Postgres server" : "embedded Postgres"})`,
    );
    await closed;
    await server.close().catch(() => undefined);
  } finally {
    await stopWorker();
    await runtime.drain();
    await live.close();
    await opened.close();
  }
}
