/**
 * A local OTLP/HTTP trace receiver (JSON protocol, POST /v1/traces) for telemetry tests: keeps
 * every span it is sent, flattened with its resource's service name.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  service: string;
  attributes: Record<string, unknown>;
  events: { name: string; attributes: Record<string, unknown> }[];
  links: { traceId: string; spanId: string }[];
  status: { code?: number; message?: string };
  startNs: bigint;
  endNs: bigint;
}

export interface OtlpReceiver {
  /** OTEL_EXPORTER_OTLP_ENDPOINT for the processes under test. */
  endpoint: string;
  spans: ReceivedSpan[];
  /** Content types of the requests received (the protocol used). */
  contentTypes: string[];
  close(): Promise<void>;
}

type AnyValue = {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
  arrayValue?: { values?: AnyValue[] };
};
const value = (v: AnyValue | undefined): unknown =>
  v?.stringValue ??
  (v?.intValue !== undefined ? Number(v.intValue) : undefined) ??
  v?.boolValue ??
  v?.doubleValue ??
  v?.arrayValue?.values?.map(value);
const attrs = (a: { key: string; value: AnyValue }[] | undefined) =>
  Object.fromEntries((a ?? []).map((x) => [x.key, value(x.value)]));

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      contentTypes.push(String(req.headers["content-type"]));
      if (req.method !== "POST" || req.url !== "/v1/traces" || !/json/.test(String(req.headers["content-type"]))) {
        res.writeHead(415).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      for (const rs of body.resourceSpans ?? []) {
        const service = String(attrs(rs.resource?.attributes)["service.name"] ?? "");
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            spans.push({
              traceId: s.traceId,
              spanId: s.spanId,
              ...(s.parentSpanId ? { parentSpanId: s.parentSpanId } : {}),
              name: s.name,
              service,
              attributes: attrs(s.attributes),
              events: (s.events ?? []).map((e: any) => ({ name: e.name, attributes: attrs(e.attributes) })),
              links: (s.links ?? []).map((l: any) => ({ traceId: l.traceId, spanId: l.spanId })),
              status: s.status ?? {},
              startNs: BigInt(s.startTimeUnixNano),
              endNs: BigInt(s.endTimeUnixNano),
            });
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    close: () => new Promise((r) => server.close(() => r())),
  };
}
