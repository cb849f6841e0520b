/**
 * Tracing off means no span work, in the process a user runs too: `npm start` and the worker run
 * an esbuild bundle, where class names are renamed (`NoopTracerProvider2`); a check by class name
 * once took tracing as on in every bundled process. The probe runs from its bundle with plain node.
 */
import { execFileSync } from "node:child_process";
import { expect, test } from "vitest";
import { bundleEntry } from "../scripts/bundle.js";

test("a bundled process with no tracer provider records no spans; one the application registers does", async () => {
  const out = execFileSync(process.execPath, [await bundleEntry("test/fixtures/tracing-probe.ts")], {
    encoding: "utf8",
    env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: "" },
  });
  expect(JSON.parse(out)).toEqual({ unregistered: false, registered: true });
}, 60_000);
