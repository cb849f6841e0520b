/**
 * One trace per run across processes and a human wait: `toolchain serve` (process A) plans a
 * request with a model (a local OpenAI-compatible mock) and stops at a confirmation; A stops;
 * process B, started later on the same database, takes the decision and finishes the run. A
 * local OTLP/HTTP receiver (JSON protocol) gets the spans of both processes.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { call } from "./helpers/api.js";
import { freshSchema, serverUrl } from "./helpers/backends.js";
import { startMockOpenAi, type MockOpenAi } from "./helpers/openai-mock.js";
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "./helpers/otlp-receiver.js";
import { nodeArgs, seedDataDir } from "./helpers/prebuilt.js";
import { waitFor } from "./helpers/wait.js";

const CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";
const SECRET = "s3cr3t-argument-value";

let receiver: OtlpReceiver;
let mock: MockOpenAi;
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
  await receiver?.close();
  await mock?.close();
});

function storage(): Record<string, string> {
  if (serverUrl) return { DATABASE_URL: serverUrl, TOOLCHAIN_SCHEMA: freshSchema("otel") };
  return {
    DATABASE_URL: "",
    TOOLCHAIN_DATA_DIR: seedDataDir(path.join(mkdtempSync(path.join(tmpdir(), "tc-otel-")), "pglite")),
  };
}

async function serve(
  env: Record<string, string>,
  key?: string,
): Promise<{ url: string; key: string; stop(): Promise<number | null> }> {
  const child = spawn(process.execPath, [...nodeArgs("src/cli/main.ts"), "serve"], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let err = "";
  child.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  await waitFor(
    () => {
      if (child.exitCode !== null) throw new Error(`server exited: ${err}`);
      return /toolchain API on (http:\/\/\S+)/.test(err) && (key !== undefined || /(tck_\S+)/.test(err));
    },
    { timeoutMs: 90_000, intervalMs: 50, what: "`toolchain serve` started" },
  );
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  return {
    url: /toolchain API on (http:\/\/\S+)/.exec(err)![1]!,
    key: key ?? /(tck_\S+)/.exec(err)![1]!,
    stop: () => (child.kill("SIGTERM"), exited),
  };
}

describe("a trace per run across processes", () => {
  test("planned run, confirmation answered by another process after a restart: one trace, parent/child links", async () => {
    receiver = await startOtlpReceiver();
    mock = await startMockOpenAi();
    mock.script({
      toolCall: {
        steps: [
          { stepId: "prepare", skillName: "core.pass", arguments: { value: SECRET } },
          {
            stepId: "publish",
            skillName: "core.pass",
            dependsOn: ["prepare"],
            arguments: { value: "${steps.prepare.output}" },
            requireConfirmation: true,
          },
        ],
      },
    });
    const env = {
      ...storage(),
      PORT: "0",
      TOOLCHAIN_DEV_KEY: "1",
      REDIS_URL: "",
      OPENAI_BASE_URL: `${mock.baseURL}`,
      OPENAI_API_KEY: "sk-test",
      TOOLCHAIN_PLANNER_MODEL: "gpt-test",
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_SERVICE_NAME: "toolchain-test",
      OTEL_BSP_SCHEDULE_DELAY: "100",
    };
    const a = await serve(env);
    const started = await call(a.url, "POST", "/api/tool-chains/run", {
      key: a.key,
      headers: { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` },
      body: { request: "prepare and publish the note", autoPlan: true },
    });
    expect(started.status, JSON.stringify(started.body)).toBeLessThan(300);
    expect(started.body.status).toBe("waiting_confirmation");
    expect(started.body.traceId).toBe(CALLER_TRACE);
    const runId = started.body.runId as string;
    expect(await a.stop()).toBe(0); // process A flushes its spans on the way out

    const b = await serve(env, a.key); // same database, another process
    const confirmer = "a1b2c3d4e5f60718";
    const done = await call(b.url, "POST", `/api/tool-chains/runs/${runId}/confirm`, {
      key: b.key,
      headers: { traceparent: `00-${"9".repeat(32)}-${confirmer}-01` },
      body: { stepId: "publish", decision: "approve" },
    });
    expect(done.body.status, JSON.stringify(done.body)).toBe("completed");
    expect(await b.stop()).toBe(0);

    const spans = receiver.spans.filter(
      (s) => s.attributes["toolchain.run.id"] === runId || s.traceId === CALLER_TRACE,
    );
    const byName = (n: string) => spans.filter((s) => s.name === n);
    const one = (n: string) => {
      const xs = byName(n);
      expect(xs, `${n} in ${spans.map((s) => s.name).join(", ")}`).toHaveLength(1);
      return xs[0]!;
    };
    const parentOf = (s: ReceivedSpan) => spans.find((p) => p.spanId === s.parentSpanId);

    // one trace, the caller's
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([CALLER_TRACE]));
    expect(receiver.contentTypes.every((c) => c.includes("application/json"))).toBe(true);
    expect(spans.every((s) => s.service === "toolchain-test")).toBe(true);

    const create = one("create_run toolchain");
    expect(create.parentSpanId).toBe(CALLER_SPAN);
    const drives = byName("invoke_workflow toolchain");
    expect(drives).toHaveLength(2);
    for (const d of drives) {
      expect(d.parentSpanId).toBe(create.spanId);
      expect(d.attributes["gen_ai.operation.name"]).toBe("invoke_workflow");
    }
    const [first, second] = drives.sort((x, y) => Number(x.startNs - y.startNs));
    expect(first!.attributes["toolchain.run.status"]).toBe("waiting_confirmation");
    expect(first!.events.map((e) => e.name)).toContain("toolchain.confirmation.waiting");
    expect(second!.attributes["toolchain.run.status"]).toBe("completed");
    expect(second!.attributes["toolchain.drive.owner"]).not.toBe(first!.attributes["toolchain.drive.owner"]);
    // the resumed drive is linked to the request that resumed it
    expect(second!.links).toContainEqual({ traceId: "9".repeat(32), spanId: confirmer });
    expect(second!.events.map((e) => e.name)).toContain("toolchain.confirmation.decided");

    const plan = one("plan");
    expect(parentOf(plan)).toBe(first);
    expect(plan.attributes["gen_ai.request.model"]).toBe("gpt-test");
    const chat = one("chat gpt-test");
    expect(chat.parentSpanId).toBe(plan.spanId);
    expect(chat.attributes["gen_ai.operation.name"]).toBe("chat");
    expect(chat.attributes["gen_ai.usage.input_tokens"]).toBe(812);
    expect(chat.attributes["gen_ai.usage.output_tokens"]).toBe(164);

    const tools = byName("execute_tool core.pass");
    expect(tools.map((t) => t.attributes["toolchain.step.id"]).sort()).toEqual(["prepare", "publish"]);
    for (const t of tools) {
      expect(t.attributes["gen_ai.tool.name"]).toBe("core.pass");
      expect(t.attributes["gen_ai.tool.type"]).toBe("function");
      expect(t.attributes["gen_ai.tool.call.id"]).toBe(`${runId}:${t.attributes["toolchain.step.id"]}`);
    }
    expect(parentOf(tools.find((t) => t.attributes["toolchain.step.id"] === "prepare")!)).toBe(first);
    expect(parentOf(tools.find((t) => t.attributes["toolchain.step.id"] === "publish")!)).toBe(second);

    // the wait, recorded once decided: from the wait to the decision, under the run's context
    const wait = one("await_confirmation core.pass");
    expect(wait.parentSpanId).toBe(create.spanId);
    expect(wait.attributes["toolchain.confirmation.step"]).toBe("publish");
    expect(wait.attributes["toolchain.confirmation.round"]).toBe(0);
    expect(wait.attributes["toolchain.confirmation.via"]).toBe("rest");
    expect(String(wait.attributes["toolchain.confirmation.decided_by"])).toMatch(/^(service|user):/);
    expect(wait.attributes["toolchain.confirmation.waited_ms"]).toBeGreaterThan(0);
    expect(wait.events.map((e) => e.name)).toEqual([
      "toolchain.confirmation.waiting",
      "toolchain.confirmation.decided",
    ]);
    expect(wait.startNs).toBeLessThan(second!.startNs);

    // content capture is off by default: no argument or result value in any attribute
    expect(JSON.stringify(receiver.spans.map((s) => [s.attributes, s.events]))).not.toContain(SECRET);
  }, 240_000);
});
