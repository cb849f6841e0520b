/** MCP clients for tests: the official SDK client over Streamable HTTP, with or without elicitation. */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  ElicitRequestSchema,
  type CallToolResult,
  type ElicitRequest,
  type ElicitResult,
  type Progress,
} from "@modelcontextprotocol/sdk/types.js";

export type ElicitHandler = (req: ElicitRequest["params"]) => Promise<ElicitResult> | ElicitResult;

export async function mcpClient(baseUrl: string, key: string, o: { elicit?: ElicitHandler } = {}): Promise<Client> {
  const client = new Client(
    { name: "toolchain-tests", version: "1.0.0" },
    { capabilities: o.elicit ? { elicitation: { form: {} } } : {} },
  );
  if (o.elicit) {
    const handler = o.elicit;
    client.setRequestHandler(ElicitRequestSchema, async (req) => handler(req.params));
  }
  await client.connect(
    new StreamableHTTPClientTransport(new URL("/mcp", baseUrl), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  );
  return client;
}

export interface ToolCall {
  result: CallToolResult;
  /** structuredContent, or the parsed `{ error }` of a failed call */
  data: any;
  text: string;
  progress: Progress[];
}

/** Calls a tool (a progress token is sent when `progress` is asked for). */
export async function callTool(
  client: Client,
  name: string,
  args: Record<string, unknown>,
  o: { progress?: boolean } = {},
): Promise<ToolCall> {
  const progress: Progress[] = [];
  const result = (await client.callTool({ name, arguments: args }, CallToolResultSchema, {
    timeout: 120_000,
    ...(o.progress ? { onprogress: (p: Progress) => progress.push(p) } : {}),
  })) as CallToolResult;
  const texts = result.content.filter((c) => c.type === "text").map((c) => (c as { text: string }).text);
  const data = result.isError ? JSON.parse(texts[1] ?? "{}") : result.structuredContent;
  return { result, data, text: texts[0] ?? "", progress };
}
