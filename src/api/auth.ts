/**
 * `Authorization: Bearer <key>` → the caller's workspace (res.locals.principal), and a request
 * budget per key. Lookups are cached briefly, so a key revoked in another process stops working
 * within `cacheMs` (at once in the process that revoked it).
 */
import type { RequestHandler, Response } from "express";
import { rateLimit } from "express-rate-limit";
import { LRUCache } from "lru-cache";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { rolesAllow, type Acting, type Action, type Via } from "../kernel/actor.js";
import { actorOf, hashApiKey, rolesOf, type AccessStore, type Principal } from "../store/access-store.js";

export interface Authenticator {
  authenticate(key: string): Promise<Principal | undefined>;
}

export interface AuthCacheOptions {
  /** Known keys are cached this long. @default 5000 */
  cacheMs?: number;
  /**
   * Unknown (or revoked) key hashes are remembered this long, so a flood of bogus keys costs no
   * database query after the first of each; a key created in another process is accepted after
   * at most this long. 0 disables. @default 5000
   */
  negativeCacheMs?: number;
  /** Most hashes remembered (each kind), least recently used dropped first. @default 100000 */
  maxEntries?: number;
}

/** An AccessStore's lookup with a short positive and negative cache; concurrent lookups of one key share one query. */
export function cachedAuthenticator(
  store: Pick<AccessStore, "authenticate">,
  opts: number | AuthCacheOptions = {},
): Authenticator & { forget(): void } {
  const o = typeof opts === "number" ? { cacheMs: opts, negativeCacheMs: opts } : opts;
  const cacheMs = o.cacheMs ?? 5_000;
  const negativeMs = o.negativeCacheMs ?? 5_000;
  const max = o.maxEntries ?? 100_000;
  const known = new LRUCache<string, Principal>({ max, ttl: Math.max(1, cacheMs), ttlAutopurge: false });
  const unknown = new LRUCache<string, true>({ max, ttl: Math.max(1, negativeMs), ttlAutopurge: false });
  const inFlight = new Map<string, Promise<Principal | undefined>>();
  return {
    async authenticate(key) {
      const h = hashApiKey(key);
      const hit = cacheMs > 0 ? known.get(h) : undefined;
      if (hit) return hit;
      if (negativeMs > 0 && unknown.has(h)) return undefined;
      let pending = inFlight.get(h);
      if (!pending) {
        pending = store.authenticate(key).finally(() => inFlight.delete(h));
        inFlight.set(h, pending);
      }
      const p = await pending;
      if (p) {
        unknown.delete(h);
        if (cacheMs > 0) known.set(h, p);
      } else {
        known.delete(h);
        if (negativeMs > 0) unknown.set(h, true);
      }
      return p;
    },
    forget: () => {
      known.clear();
      unknown.clear();
    },
  };
}

/**
 * Requests per minute per client address, before authentication (a flood of bogus keys is cut
 * off here, before it costs a hash and a lookup). 0 disables. Behind a reverse proxy set
 * Express's `trust proxy` so the address is the client's.
 *
 * Mounted first (src/server/app.ts): an answer from here has not been through helmet, so it sets the
 * two headers a JSON error needs itself. The request's body is never read.
 */
export function perIpRateLimit(requestsPerMinute: number): RequestHandler {
  if (requestsPerMinute <= 0) return (_req, _res, next) => next();
  return rateLimit({
    windowMs: 60_000,
    limit: requestsPerMinute,
    standardHeaders: "draft-8",
    legacyHeaders: false,
    handler: (req, res, next) => {
      const reset = (req as { rateLimit?: { resetTime?: Date } }).rateLimit?.resetTime;
      const retryAfter = reset ? Math.max(1, Math.ceil((reset.getTime() - Date.now()) / 1000)) : 60;
      res.setHeader("Retry-After", String(retryAfter));
      res.setHeader("X-Content-Type-Options", "nosniff");
      res.setHeader("Cache-Control", "no-store");
      // the unread body is not drained: the connection closes after this answer
      res.setHeader("Connection", "close");
      next(
        new ToolchainError(
          ErrorCode.TOO_MANY_REQUESTS,
          `more than ${requestsPerMinute} requests per minute from this address; retry in ${retryAfter} s`,
          { details: { retryAfterSeconds: retryAfter, scope: "address" } },
        ),
      );
    },
  });
}

export function principalOf(res: Response): Principal {
  return res.locals.principal as Principal;
}

/** 403 ROLE_NOT_ALLOWED unless the principal's roles grant `action` (no roles: every action). */
export function assertMay(p: Principal, action: Action): void {
  const roles = rolesOf(p);
  if (rolesAllow(roles, action)) return;
  throw new ToolchainError(
    ErrorCode.ROLE_NOT_ALLOWED,
    `your roles in workspace ${p.workspaceId} (${roles!.join(", ") || "none"}) do not allow ${action.replace("_", " ")}`,
    { details: { action, roles } },
  );
}

/** Surfaces that talk REST may say which they are; anything else is plain REST. */
const REST_VIAS: ReadonlySet<Via> = new Set<Via>(["rest", "console", "cli"]);

/** Who acts, through which surface (the `X-Toolchain-Client` header: console, cli; default rest). */
export function actingOf(p: Principal, client: string | undefined): Acting {
  const v = (client ?? "").trim().toLowerCase() as Via;
  return { by: actorOf(p), via: REST_VIAS.has(v) ? v : "rest" };
}

/** A key (≤ 512 characters) or a signed-in JWT (longer: src/api/oidc.ts). */
const BEARER = /^Bearer\s+([A-Za-z0-9._~+/=-]{1,8192})\s*$/i;

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
      next(
        new ToolchainError(
          ErrorCode.TOO_MANY_REQUESTS,
          `more than ${requestsPerMinute} requests per minute with this key; retry in ${retryAfter} s`,
          { details: { retryAfterSeconds: retryAfter } },
        ),
      );
    },
  });
}
