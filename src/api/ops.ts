/** Unauthenticated operational routes: liveness, readiness, metrics, the OpenAPI document. */
import { Router } from "express";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import type { ApiMetrics } from "./metrics.js";
import { openApiDocument } from "./openapi.js";

export function opsRouter(o: { ready: () => Promise<void>; metrics?: ApiMetrics; readyTimeoutMs?: number }): Router {
  const r = Router();
  let doc: string | undefined;
  r.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  r.get("/readyz", async (_req, res) => {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([o.ready(), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error("timed out")), o.readyTimeoutMs ?? 2_000)))]);
    } catch (e) {
      throw new ToolchainError(ErrorCode.NOT_READY, `database not reachable: ${(e as Error).message}`);
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
    r.get("/metrics", async (_req, res) => {
      res.type(registry.contentType).send(await registry.metrics());
    });
  }
  return r;
}
