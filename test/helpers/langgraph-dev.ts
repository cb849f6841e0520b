/**
 * LangGraph's own dev server (@langchain/langgraph-cli `dev`, in-memory API server, analytics off) on
 * a free loopback port (2024 is taken on these machines), started from this checkout as a new user
 * would, and an SDK client on it. Its own process group, so its workers stop with it.
 */
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { Client } from "@langchain/langgraph-sdk";
import { waitFor } from "./wait.js";

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export interface LangGraphDev {
  client: Client;
  stop(): void;
}

/** `config`: another langgraph.json (default: the checkout's); `env`: added to the server's environment. */
export async function startLangGraphDev(
  o: { config?: string; env?: Record<string, string> } = {},
): Promise<LangGraphDev> {
  const port = await freePort();
  let log = "";
  const server = spawn(
    process.execPath,
    [
      "node_modules/@langchain/langgraph-cli/dist/cli/cli.mjs",
      "dev",
      "--port",
      String(port),
      "--host",
      "127.0.0.1",
      "--no-browser",
      "--no-reload",
      ...(o.config ? ["--config", o.config] : []),
    ],
    {
      env: { ...process.env, LANGGRAPH_CLI_NO_ANALYTICS: "1", LANGSMITH_TRACING: "false", ...o.env },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    },
  );
  server.stdout!.on("data", (d: Buffer) => (log += d.toString()));
  server.stderr!.on("data", (d: Buffer) => (log += d.toString()));
  const stop = () => {
    try {
      if (server.pid) process.kill(-server.pid, "SIGTERM");
    } catch {
      /* already gone */
    }
  };
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitFor(
      async () => {
        if (server.exitCode !== null) throw new Error(`langgraph dev exited ${server.exitCode}:\n${log}`);
        return (await fetch(`${base}/ok`).catch(() => undefined))?.ok;
      },
      { timeoutMs: 90_000, intervalMs: 250, what: "langgraph dev serving /ok" },
    );
  } catch (e) {
    stop();
    throw e;
  }
  return { client: new Client({ apiUrl: base }), stop };
}
