/**
 * Security headers for the whole app (helmet), and the console's Content-Security-Policy.
 *
 * API responses are JSON and event streams: nothing in them may load or run anything, so their
 * policy is `default-src 'none'`. The console's pages load only their own script and stylesheet
 * (no inline script or style, no remote origin), and require Trusted Types, so a string can never
 * become markup through an HTML sink.
 */
import type { RequestHandler } from "express";
import helmet from "helmet";

const common = {
  baseUri: ["'none'"],
  formAction: ["'none'"],
  frameAncestors: ["'none'"],
};

export const API_CSP = { useDefaults: false, directives: { defaultSrc: ["'none'"], ...common } };

export const CONSOLE_CSP = {
  useDefaults: false,
  directives: {
    defaultSrc: ["'none'"],
    scriptSrc: ["'self'"],
    styleSrc: ["'self'"],
    imgSrc: ["'self'", "data:"],
    connectSrc: ["'self'"],
    manifestSrc: ["'self'"],
    ...common,
    requireTrustedTypesFor: ["'script'"],
    trustedTypes: ["'none'"],
  },
};

/** helmet's defaults (nosniff, Referrer-Policy, frame and cross-origin policies, HSTS…) with the API's CSP. */
export function securityHeaders(): RequestHandler {
  return helmet({
    contentSecurityPolicy: API_CSP,
    frameguard: { action: "deny" },
    referrerPolicy: { policy: "no-referrer" },
  });
}

/** The console's CSP, replacing the API's on its routes. */
export function consoleCsp(): RequestHandler {
  return helmet.contentSecurityPolicy(CONSOLE_CSP);
}
