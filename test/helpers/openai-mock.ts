/**
 * A small OpenAI-compatible server on loopback for offline planner tests: `POST
 * /v1/chat/completions` answers from a script, shaped as the real API answers (a tool call for
 * function calling, JSON content for json_schema), and records every request body.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type Scripted =
  /** a tool call to the bound function with these arguments (an object is JSON-encoded) */
  | { toolCall: unknown; name?: string; finish?: string }
  /** assistant content (json_schema / json mode answers): an object is JSON-encoded */
  | { content: unknown; finish?: string }
  /** a refusal, as OpenAI sends it: `message.refusal` with the text, no content */
  | { refusal: string }
  /** an HTTP error status with an OpenAI-style error body (and headers such as retry-after) */
  | { status: number; message?: string; headers?: Record<string, string> }
  /** never answer (until the client gives up or the server closes) */
  | { hang: true };

export interface MockOpenAi {
  baseURL: string;
  /** Request bodies in arrival order. */
  requests: Record<string, any>[];
  /** When each request arrived (ms, Date.now), in the same order. */
  arrivals: number[];
  /** Append answers; each request takes the next one (the last one repeats when the script runs out). */
  script(...answers: Scripted[]): void;
  /** Forget answers not taken yet (and the one that would repeat). */
  reset(): void;
  close(): Promise<void>;
}

const usage = { prompt_tokens: 812, completion_tokens: 164, total_tokens: 976 };

function completion(model: string, message: Record<string, unknown>, finish: string) {
  return {
    id: `chatcmpl-${Math.random().toString(36).slice(2, 12)}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
    usage,
    system_fingerprint: "fp_mock",
  };
}

export async function startMockOpenAi(): Promise<MockOpenAi> {
  const queue: Scripted[] = [];
  let last: Scripted | undefined;
  const requests: Record<string, any>[] = [];
  const arrivals: number[] = [];
  const hanging = new Set<ServerResponse>();
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
        res
          .writeHead(404, { "content-type": "application/json" })
          .end(JSON.stringify({ error: { message: "not found", type: "invalid_request_error" } }));
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "{}");
      requests.push(body);
      arrivals.push(Date.now());
      const next = queue.shift() ?? last;
      last = next;
      const model = String(body.model ?? "mock");
      if (!next) {
        res
          .writeHead(500, { "content-type": "application/json" })
          .end(JSON.stringify({ error: { message: "no scripted answer", type: "server_error" } }));
      } else if ("hang" in next) {
        hanging.add(res);
        res.on("close", () => hanging.delete(res));
      } else if ("status" in next) {
        res.writeHead(next.status, { "content-type": "application/json", ...next.headers }).end(
          JSON.stringify({
            error: { message: next.message ?? "upstream failure", type: "server_error", code: null },
          }),
        );
      } else if ("refusal" in next) {
        const message = { role: "assistant", content: null, refusal: next.refusal };
        res
          .writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify(completion(model, message, "stop")));
      } else if ("toolCall" in next) {
        const fn = next.name ?? body.tools?.[0]?.function?.name ?? "extract";
        const args = typeof next.toolCall === "string" ? next.toolCall : JSON.stringify(next.toolCall);
        const message = {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "call_mock1", type: "function", function: { name: fn, arguments: args } }],
          refusal: null,
        };
        res
          .writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify(completion(model, message, next.finish ?? "tool_calls")));
      } else {
        const content = typeof next.content === "string" ? next.content : JSON.stringify(next.content);
        res
          .writeHead(200, { "content-type": "application/json" })
          .end(JSON.stringify(completion(model, { role: "assistant", content, refusal: null }, next.finish ?? "stop")));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    baseURL: `http://127.0.0.1:${port}/v1`,
    requests,
    arrivals,
    script: (...answers) => {
      queue.push(...answers);
    },
    reset: () => {
      queue.length = 0;
      last = undefined;
    },
    close: async () => {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
