/**
 * A chat agent that plans and runs tool chains, asking you before a step with side effects runs.
 *
 *   OPENAI_API_KEY=… npx tsx examples/agent.ts "Plan an approval system with e-mail notifications, estimate it and put the tasks into the Tasks table"
 *   OPENAI_BASE_URL=http://127.0.0.1:11434/v1 TOOLCHAIN_AGENT_MODEL=qwen2.5 npx tsx examples/agent.ts "…"
 *   … --approve     approve every confirmation without asking (demo only)
 *
 * The agent is LangChain's `createAgent` with a checkpointer; the chain's confirmation arrives as
 * the agent's own interrupt, and the answer goes back with `Command({ resume: { decisions } })`.
 * Storage: DATABASE_URL, else the embedded database (stop `npm start` first: it holds it).
 */
import { createInterface } from "node:readline/promises";
import { HumanMessage } from "@langchain/core/messages";
import { Command, MemorySaver } from "@langchain/langgraph";
import { ChatOpenAI } from "@langchain/openai";
import { createAgent } from "langchain";
import { createToolChainTools, type ToolChainDecision, type ToolChainInterrupt } from "../src/index.js";
import { openRuntime } from "../src/runtime/open.js";

const argv = process.argv.slice(2);
const autoApprove = argv.includes("--approve");
const request =
  argv.filter((a) => !a.startsWith("--")).join(" ") ||
  "Plan an approval system with e-mail notifications and an audit log, estimate the effort, build a timeline and put the tasks into the Tasks table";

if (!process.env.OPENAI_API_KEY && !process.env.OPENAI_BASE_URL) {
  console.log(
    [
      "This example needs a chat model that can call tools:",
      '  OPENAI_API_KEY=sk-… npx tsx examples/agent.ts "<request>"                (OpenAI, model TOOLCHAIN_AGENT_MODEL, default gpt-4o-mini)',
      '  OPENAI_BASE_URL=http://127.0.0.1:11434/v1 TOOLCHAIN_AGENT_MODEL=<model> npx tsx examples/agent.ts "<request>"   (any OpenAI-compatible server)',
      "Without a model, test/agent-tools.test.ts shows the same agent with scripted tool calls (npx vitest run test/agent-tools.test.ts).",
    ].join("\n"),
  );
  process.exit(0);
}

const { runtime, tables, close } = await openRuntime();
try {
  const workspaceId = "local";
  const table = await tables?.ensureWorkspace(workspaceId); // the workspace's demo "Tasks" table
  const model = new ChatOpenAI({
    model: process.env.TOOLCHAIN_AGENT_MODEL ?? "gpt-4o-mini",
    temperature: 0,
    apiKey: process.env.OPENAI_API_KEY || "not-needed", // local servers need none; the client insists
    ...(process.env.OPENAI_BASE_URL ? { configuration: { baseURL: process.env.OPENAI_BASE_URL } } : {}),
  });
  const agent = createAgent({
    model,
    tools: createToolChainTools({ runtime, workspaceId }),
    checkpointer: new MemorySaver(),
    systemPrompt:
      "You help people get work done with tool chains. For a request, call plan_tool_chain, show the plan in a few lines, then call run_tool_chain with that plan " +
      `and context ${JSON.stringify({ table: { id: table?.id ?? "Tasks" }, startDate: new Date().toISOString().slice(0, 10) })}. ` +
      "Report what the chain did from its result (status, outputs, errors).",
  });
  const config = { configurable: { thread_id: `example-${Date.now()}` } };
  const rl = createInterface({ input: process.stdin, output: process.stdout });

  let input: unknown = { messages: [new HumanMessage(request)] };
  for (;;) {
    const out = (await agent.invoke(input as never, config)) as {
      messages: { content: unknown }[];
      __interrupt__?: { value: unknown }[];
    };
    const ask = out.__interrupt__?.[0]?.value as ToolChainInterrupt | undefined;
    if (!ask) {
      console.log(`\n${String(out.messages.at(-1)?.content ?? "")}`);
      break;
    }
    if (ask.resumeError)
      console.log(`(your last answer was refused: ${ask.resumeError.code}: ${ask.resumeError.message})`);
    console.log(`\n${ask.message}`);
    const decisions: Record<string, ToolChainDecision> = {};
    for (const p of ask.pending) {
      console.log(
        `\n  ${p.stepId} (${p.skillName}, ${p.kind ?? "confirmation"})\n  preview:   ${JSON.stringify(p.preview)}\n  arguments: ${JSON.stringify(p.arguments)}`,
      );
      const yes = autoApprove || /^y/i.test(await rl.question(`  Approve ${p.stepId}? [y/N] `));
      decisions[p.stepId] = { decision: yes ? "approve" : "reject" };
    }
    input = new Command({ resume: { decisions } });
  }
  rl.close();
} finally {
  await close();
}
