/**
 * Tracing suite: per-step cost of a run with tracing off (no SDK loaded: the default) and on (our
 * SDK from OTEL_* exporting OTLP/HTTP JSON to a local sink that discards), side by side. Same
 * process, off first (the SDK cannot be unloaded). Steps: a linear chain of core.pass, memory store.
 *   npx tsx bench/tracing.ts      (BENCH_QUICK=1: fewer steps and repetitions)
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { createRuntime } from "../src/index.js";
import { setupTelemetry } from "../src/telemetry/setup.js";
import { emitLine, log, median, now, round, isMain } from "./timing.js";

async function perStepMs(steps: number, reps: number): Promise<number> {
  const rt = createRuntime({});
  const plan = {
    steps: Array.from({ length: steps }, (_, i) => ({
      stepId: `s${i}`,
      skillName: "core.pass",
      dependsOn: i ? [`s${i - 1}`] : [],
      arguments: { value: i },
    })),
  };
  await rt.run(plan).result; // warm-up
  const xs: number[] = [];
  for (let r = 0; r < reps; r++) {
    const t0 = now();
    const v = await rt.run(plan).result;
    if (v.status !== "completed") throw new Error(`bench run ${v.status}`);
    xs.push((now() - t0) / steps);
  }
  return median(xs);
}

export async function tracingSuite(o: { quick?: boolean } = {}): Promise<void> {
  const steps = o.quick ? 100 : 500;
  const reps = o.quick ? 3 : 7;
  const off = await perStepMs(steps, reps);
  log(`tracing off: ${round(off)} ms/step`);
  let spans = 0;
  const sink = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      spans += (body.match(/"spanId"/g) ?? []).length;
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((r) => sink.listen(0, "127.0.0.1", r));
  const telemetry = await setupTelemetry({
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(sink.address() as AddressInfo).port}`,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
  });
  const on = await perStepMs(steps, reps);
  await telemetry.flush();
  await telemetry.shutdown();
  sink.close();
  log(`tracing on: ${round(on)} ms/step (${spans} spans exported)`);
  emitLine({
    suite: "tracing",
    steps,
    reps,
    offMsPerStep: round(off, 4),
    onMsPerStep: round(on, 4),
    onOverOff: round(on / off, 3),
    spansExported: spans,
  });
}

if (isMain("tracing")) await tracingSuite({ quick: process.env.BENCH_QUICK === "1" });
