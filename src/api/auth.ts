/**
 * `Authorization: Bearer <key>` → the caller's workspace (res.locals.principal), and a request
 * budget per key. Lookups are cached briefly, so a key revoked in another process stops working
 * within `cacheMs` (at once in the process that revoked it).
 */
import type { RequestHandler, Response } from "express";
import { rateLimit } from "express-rate-limit";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { hashApiKey, type AccessStore, type Principal } from "../store/access-store.js";

export interface Authenticator {
  authenticate(key: string): Promise<Principal | undefined>;
}

/** An AccessStore's lookup with a short positive cache. @default cacheMs 5000 */
export function cachedAuthenticator(store: Pick<AccessStore, "authenticate">, cacheMs = 5_000): Authenticator & { forget(): void } {
  const cache = new Map<string, { p: Principal; until: number }>();
  return {
    async authenticate(key) {
      const h = hashApiKey(key);
      const hit = cache.get(h);
      if (hit && hit.until > Date.now()) return hit.p;
      const p = await store.authenticate(key);
      if (p && cacheMs > 0) {
        if (cache.size >= 10_000) cache.clear();
        cache.set(h, { p, until: Date.now() + cacheMs });
      } else cache.delete(h);
      return p;
    },
    forget: () => cache.clear(),
  };
}

export function principalOf(res: Response): Principal {
  return res.locals.principal as Principal;
}

const BEARER = /^Bearer\s+([A-Za-z0-9._~+/=-]{1,512})\s*$/i;

export function requireKey(auth: Authenticator): RequestHandler {
  return async (req, res, next) => {
    const m = BEARER.exec(req.get("authorization") ?? "");
    if (!m) throw new ToolchainError(ErrorCode.UNAUTHORIZED, "missing API key: send Authorization: Bearer <key>");
    const p = await auth.authenticate(m[1]!);
    if (!p) throw new ToolchainError(ErrorCode.UNAUTHORIZED, "unknown or revoked API key");
    res.locals.principal = p;
    next();
  };
}

/** Per key, per process (a cluster of n API processes allows n times this). 0 disables. */
export function perKeyRateLimit(requestsPerMinute: number): RequestHandler {
  if (requestsPerMinute <= 0) return (_req, _res, next) => next();
  return rateLimit({
    windowMs: 60_000,
    limit: requestsPerMinute,
    standardHeaders: "draft-8",
    legacyHeaders: false,
    keyGenerator: (_req, res) => principalOf(res).keyId,
    handler: (req, res, next) => {
      const reset = (req as { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
      const retryAfter = reset ? Math.max(1, Math.ceil((reset.getTime() - Date.now()) / 1000)) : 60;
      res.setHeader("Retry-After", String(retryAfter));
      next(new ToolchainError(ErrorCode.TOO_MANY_REQUESTS, `more than ${requestsPerMinute} requests per minute with this key; retry in ${retryAfter} s`, { details: { retryAfterSeconds: retryAfter } }));
    },
  });
}
