/**
 * Spans of runs in this process, exported by our SDK (setupTelemetry, OTLP/HTTP JSON) to a local
 * receiver: a library run under the caller's active span with a retried step, a compensated step
 * and an HTTP-calling skill that propagates the trace; an MCP run_tool_chain call carrying
 * `_meta.traceparent`; content capture off (no argument value in any attribute).
 */
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { trace } from "@opentelemetry/api";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { z } from "zod";
import { createRuntime } from "../src/runtime/runtime.js";
import { defineSkill } from "../src/skills/contract.js";
import { setupTelemetry, type Telemetry } from "../src/telemetry/setup.js";
import { newKey, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { mcpClient } from "./helpers/mcp.js";
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "./helpers/otlp-receiver.js";
import { EffectLedger, effectSkill } from "./helpers/skills.js";
import { waitFor } from "./helpers/wait.js";

const SECRET = "do-not-export-this-value";
let receiver: OtlpReceiver;
let telemetry: Telemetry;
let api: ApiUnderTest | undefined;
const seen: IncomingHttpHeaders[] = [];
const downstream = createServer((req, res) => {
  seen.push(req.headers);
  res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
});

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  process.env.OTEL_EXPORTER_OTLP_PROTOCOL = "http/json";
  process.env.OTEL_BSP_SCHEDULE_DELAY = "50";
  telemetry = await setupTelemetry({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_SERVICE_NAME: "toolchain-inproc",
  });
  await new Promise<void>((r) => downstream.listen(0, "127.0.0.1", r));
});
afterAll(async () => {
  await api?.close();
  await telemetry?.shutdown();
  await receiver?.close();
  downstream.close();
});

const httpSkill = () =>
  defineSkill({
    name: "test.http_get",
    description: "GET a URL, propagating the trace",
    input: z.object({ url: z.string() }),
    sideEffects: "external",
    idempotent: true,
    async compensate() {}, // a GET has nothing to undo
    async execute(args, ctx) {
      const r = await fetch(args.url, { headers: ctx.traceHeaders(), signal: ctx.signal });
      return r.json();
    },
  });

const spansOf = async (pred: (s: ReceivedSpan) => boolean, min: number): Promise<ReceivedSpan[]> => {
  await telemetry.flush();
  return waitFor(
    () => {
      const xs = receiver.spans.filter(pred);
      return xs.length >= min ? xs : undefined;
    },
    { timeoutMs: 10_000, what: `${min} spans` },
  );
};

describe("spans of a run in this process", () => {
  test("library run under the caller's span: retries, compensation, HTTP propagation, no content", async () => {
    expect(telemetry.enabled).toBe(true);
    const ledger = new EffectLedger();
    const rt = createRuntime({ skills: [effectSkill(ledger), httpSkill()] });
    const url = `http://127.0.0.1:${(downstream.address() as AddressInfo).port}/x`;
    const tracer = trace.getTracer("caller");
    const { view, caller } = await tracer.startActiveSpan("agent turn", async (span) => {
      const h = rt.run({
        planId: "saga",
        onFailure: "fail_fast",
        steps: [
          { stepId: "call", skillName: "test.http_get", arguments: { url } },
          { stepId: "write", skillName: "test.effect", dependsOn: ["call"], arguments: { label: SECRET } },
          {
            stepId: "flaky",
            skillName: "core.fail",
            dependsOn: ["write"],
            arguments: { code: "TRANSIENT", untilAttempt: 2, value: SECRET },
            retry: { maxAttempts: 3, backoff: { kind: "fixed", initialMs: 1 } },
          },
          { stepId: "boom", skillName: "core.fail", dependsOn: ["flaky"], arguments: { message: SECRET } },
        ],
      });
      const v = await h.result;
      span.end();
      return { view: v, caller: span.spanContext() };
    });
    expect(view.status).toBe("rolled_back");
    expect(ledger.log).toEqual([`effect:${SECRET}`, `undo:${SECRET}`]);

    const runId = view.runId;
    const spans = await spansOf((s) => s.traceId === caller.traceId, 9);
    const named = (n: string) => spans.filter((s) => s.name === n);
    const create = named("create_run saga")[0]!;
    expect(create.parentSpanId).toBe(caller.spanId);
    const drive = named("invoke_workflow saga")[0]!;
    expect(drive.parentSpanId).toBe(create.spanId);
    expect(drive.attributes["toolchain.run.status"]).toBe("rolled_back");

    // a retried step: one execute_tool span per attempt, the failed one with error.type and status
    const flaky = named("execute_tool core.fail").filter((s) => s.attributes["toolchain.step.id"] === "flaky");
    expect(flaky.map((s) => s.attributes["toolchain.attempt"]).sort()).toEqual([1, 2]);
    const [a1, a2] = flaky.sort(
      (x, y) => Number(x.attributes["toolchain.attempt"]) - Number(y.attributes["toolchain.attempt"]),
    );
    expect(a1!.attributes["error.type"]).toBe("TRANSIENT");
    expect(a1!.status.code).toBe(2);
    expect(a2!.status.code).toBe(1);
    expect(a1!.attributes["gen_ai.tool.call.id"]).toBe(`${runId}:flaky`);
    expect(
      drive.events.filter((e) => e.name === "toolchain.step.retrying" && e.attributes["toolchain.step.id"] === "flaky"),
    ).toHaveLength(1);
    for (const s of flaky) expect(s.parentSpanId).toBe(drive.spanId);

    // the failed step and the compensation of the completed one
    const boom = named("execute_tool core.fail").find((s) => s.attributes["toolchain.step.id"] === "boom")!; // (retried too: maxAttempts 2 by default)
    expect(boom.attributes["error.type"]).toBe("EXECUTION_FAILED");
    const comp = named("compensate test.effect");
    expect(comp).toHaveLength(1);
    expect(comp[0]!.parentSpanId).toBe(drive.spanId);
    expect(comp[0]!.attributes["toolchain.step.id"]).toBe("write");
    expect(comp[0]!.status.code).toBe(1);

    // the HTTP-calling skill sent its execute_tool span as the parent
    const http = named("execute_tool test.http_get")[0]!;
    expect(http.attributes["gen_ai.tool.type"]).toBe("extension");
    expect(seen.at(-1)!.traceparent).toBe(`00-${caller.traceId}-${http.spanId}-01`);

    // content capture is off: no argument or result value anywhere
    expect(JSON.stringify(spans.map((s) => [s.attributes, s.events]))).not.toContain(SECRET);
  });

  test("MCP run_tool_chain with params._meta.traceparent: the run joins the caller's trace", async () => {
    const rt = createRuntime({});
    api = await serveApi(rt, undefined);
    const key = await newKey(api.access, "w1");
    const client = await mcpClient(api.url, key);
    const traceId = "0af7651916cd43dd8448eb211c80319c";
    const parent = "b7ad6b7169203331";
    const result = await client.callTool(
      {
        name: "run_tool_chain",
        arguments: {
          plan: { planId: "mcp-chain", steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: SECRET } }] },
        },
        _meta: { traceparent: `00-${traceId}-${parent}-01`, tracestate: "vendor=x" },
      },
      CallToolResultSchema,
    );
    expect((result.structuredContent as { status: string }).status).toBe("completed");
    await client.close();
    const spans = await spansOf((s) => s.traceId === traceId, 3);
    const create = spans.find((s) => s.name === "create_run mcp-chain")!;
    expect(create.parentSpanId).toBe(parent);
    const drive = spans.find((s) => s.name === "invoke_workflow mcp-chain")!;
    expect(drive.parentSpanId).toBe(create.spanId);
    const tool = spans.find((s) => s.name === "execute_tool core.pass")!;
    expect(tool.parentSpanId).toBe(drive.spanId);
    expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain(SECRET);

    // what operators alert on, exposed next to the existing metrics
    const metrics = await (await fetch(`${api.url}/metrics`)).text();
    for (const name of [
      "toolchain_confirmations_waiting",
      "toolchain_approvals_expired_total",
      "toolchain_compensation_failures_total",
      "toolchain_drive_failures_total",
      "toolchain_lease_losses_total",
    ])
      expect(metrics).toContain(`# TYPE ${name}`);
    expect(metrics).toContain('toolchain_confirmations_waiting{age="gt_1d"} 0');
  });
});
