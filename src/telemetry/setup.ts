/**
 * Tracing from the standard OTEL_* variables. With neither OTEL_EXPORTER_OTLP_ENDPOINT nor
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set (or OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none),
 * nothing is loaded: the SDK modules are imported dynamically, only when configured.
 *
 * Read here: the endpoints, OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL (`http/protobuf`, the default, or
 * `http/json`), OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES (default service name `toolchain`),
 * OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT. Read by the SDK itself: OTEL_TRACES_SAMPLER(_ARG),
 * OTEL_EXPORTER_OTLP_(TRACES_)HEADERS / TIMEOUT / COMPRESSION, OTEL_BSP_* (batching), span limits.
 */
import { markTracing, takeForcedTraceId } from "./tracing.js";

export interface Telemetry {
  /** Whether an SDK was started. */
  enabled: boolean;
  /** Export what is buffered now (tests, before a process hands over). */
  flush(): Promise<void>;
  /** Flush and stop; later spans are dropped. */
  shutdown(): Promise<void>;
}

export interface TelemetryConfig {
  url: string;
  protocol: "http/protobuf" | "http/json";
  serviceName?: string;
  captureContent: boolean;
}

const OFF: Telemetry = { enabled: false, flush: async () => undefined, shutdown: async () => undefined };

/** What the environment asks for (pure); null: tracing off. Throws naming the variable for a bad protocol. */
export function telemetryConfigFromEnv(env: NodeJS.ProcessEnv = process.env): TelemetryConfig | null {
  const v = (k: string) => env[k]?.trim() || undefined;
  if (v("OTEL_SDK_DISABLED")?.toLowerCase() === "true") return null;
  if (v("OTEL_TRACES_EXPORTER")?.toLowerCase() === "none") return null;
  const specific = v("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  const base = v("OTEL_EXPORTER_OTLP_ENDPOINT");
  if (!specific && !base) return null;
  // the signal-specific endpoint is used as is; the general one gets the signal's path (OTLP spec)
  const url = specific ?? `${base!.replace(/\/+$/, "")}/v1/traces`;
  const protocol = v("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") ?? v("OTEL_EXPORTER_OTLP_PROTOCOL") ?? "http/protobuf";
  if (protocol !== "http/protobuf" && protocol !== "http/json")
    throw new Error(
      `OTEL_EXPORTER_OTLP_PROTOCOL: "${protocol}" is not supported (use http/protobuf or http/json; grpc is not bundled)`,
    );
  return {
    url,
    protocol,
    ...(v("OTEL_SERVICE_NAME") ? { serviceName: v("OTEL_SERVICE_NAME") } : {}),
    captureContent: v("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")?.toLowerCase() === "true",
  };
}

let current: Telemetry | undefined;

/**
 * Start the trace SDK once per process when the environment configures it (idempotent). The
 * server, worker, CLI and MCP stdio server call it at start; an embedding application with its
 * own SDK does not need it (the runtime uses the global tracer provider either way).
 */
export async function setupTelemetry(env: NodeJS.ProcessEnv = process.env): Promise<Telemetry> {
  if (current) return current;
  const cfg = telemetryConfigFromEnv(env);
  if (!cfg) return (current = OFF);
  const [{ NodeTracerProvider, BatchSpanProcessor, RandomIdGenerator }, res, exporterMod] = await Promise.all([
    import("@opentelemetry/sdk-trace-node"),
    import("@opentelemetry/resources"),
    cfg.protocol === "http/json"
      ? import("@opentelemetry/exporter-trace-otlp-http")
      : import("@opentelemetry/exporter-trace-otlp-proto"),
  ]);
  const random = new RandomIdGenerator();
  const provider = new NodeTracerProvider({
    resource: res
      .resourceFromAttributes({ "service.name": cfg.serviceName ?? "toolchain" })
      .merge(res.detectResources({ detectors: [res.envDetector, res.processDetector, res.hostDetector] })),
    // a run's first span carries the run's trace id (tracing.ts, startSpan rootTraceId)
    idGenerator: {
      generateTraceId: () => takeForcedTraceId() ?? random.generateTraceId(),
      generateSpanId: () => random.generateSpanId(),
    },
    spanProcessors: [new BatchSpanProcessor(new exporterMod.OTLPTraceExporter({ url: cfg.url }))],
  });
  provider.register(); // AsyncLocalStorage context manager, W3C trace context + baggage propagators
  markTracing(true, cfg.captureContent);
  current = {
    enabled: true,
    flush: () => provider.forceFlush(),
    shutdown: async () => {
      markTracing(false, false);
      await provider.shutdown().catch(() => undefined);
    },
  };
  return current;
}

/** Flush and stop the SDK if one was started (a process about to exit). */
export async function shutdownTelemetry(): Promise<void> {
  await current?.shutdown();
}
