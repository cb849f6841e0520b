/** W3C trace context on incoming HTTP requests (Express middleware). */
import type { NextFunction, Request, Response } from "express";
import { carrierFrom } from "./trace-context.js";
import { context, contextOf, tracingOn } from "./tracing.js";

/** Handle the request under the caller's `traceparent` / `tracestate` (tracing on; otherwise nothing happens). */
export function incomingTraceContext(req: Request, _res: Response, next: NextFunction): void {
  if (!tracingOn()) return next();
  const ctx = contextOf(carrierFrom({ traceparent: req.get("traceparent"), tracestate: req.get("tracestate") }));
  if (!ctx) return next();
  context.with(ctx, next);
}
