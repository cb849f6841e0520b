/**
 * Operational routes: liveness, readiness, metrics, the OpenAPI document. No API key: they are
 * for operators and probes. /readyz answers a code only (the database error, with its host and
 * port, goes to the log); /metrics shows run counts of every workspace, so it can require its
 * own token (`metricsToken`, TOOLCHAIN_METRICS_TOKEN).
 */
import { timingSafeEqual, createHash } from "node:crypto";
import { Router } from "express";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import type { ApiMetrics } from "./metrics.js";
import { openApiDocument } from "./openapi.js";

export interface OpsOptions {
  ready: () => Promise<void>;
  metrics?: ApiMetrics;
  readyTimeoutMs?: number;
  /** /metrics requires `Authorization: Bearer <metricsToken>` when set. */
  metricsToken?: string;
  /** Where the reason a readiness check failed goes. @default console.error */
  log?: (line: string) => void;
}

const digest = (s: string) => createHash("sha256").update(s).digest();

export function opsRouter(o: OpsOptions): Router {
  const log = o.log ?? ((l: string) => console.error(l));
  const r = Router();
  let doc: string | undefined;
  r.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  r.get("/readyz", async (_req, res) => {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        o.ready(),
        new Promise(
          (_, reject) => (timer = setTimeout(() => reject(new Error("timed out")), o.readyTimeoutMs ?? 2_000)),
        ),
      ]);
    } catch (e) {
      log(`readyz: database not reachable: ${(e as Error)?.message ?? String(e)}`);
      throw new ToolchainError(ErrorCode.NOT_READY, "database not reachable");
    } finally {
      clearTimeout(timer);
    }
    res.json({ status: "ready" });
  });
  r.get("/openapi.json", (_req, res) => {
    doc ??= JSON.stringify(openApiDocument());
    res.type("application/json").send(doc);
  });
  if (o.metrics) {
    const { registry } = o.metrics;
    const expected = o.metricsToken ? digest(o.metricsToken) : undefined;
    r.get("/metrics", async (req, res) => {
      if (expected) {
        const m = /^Bearer\s+(\S+)\s*$/i.exec(req.get("authorization") ?? "");
        if (!m || !timingSafeEqual(digest(m[1]!), expected))
          throw new ToolchainError(
            ErrorCode.UNAUTHORIZED,
            "/metrics needs the metrics token: send Authorization: Bearer <TOOLCHAIN_METRICS_TOKEN>",
          );
      }
      res.setHeader("Cache-Control", "no-store");
      res.type(registry.contentType).send(await registry.metrics());
    });
  }
  return r;
}
