/**
 * A path segment that is not valid percent-encoding (`%ZZ`, `%E0%A4`, a lone surrogate's bytes):
 * Express's router throws a URIError while matching, before any handler sees the request. This
 * names the route parameter it was meant for, read from the app's own route templates, so the
 * answer is a 400 INVALID_PATH naming the field instead of a 500.
 */
import type { Request } from "express";

interface Layer {
  route?: { path?: unknown; methods?: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

/** Every route template of the app (`/api/tables/:tableId`), nested routers included. */
function templates(stack: Layer[] | undefined, out: string[] = []): string[] {
  for (const l of stack ?? []) {
    if (typeof l.route?.path === "string") out.push(l.route.path);
    else if (l.handle?.stack) templates(l.handle.stack, out);
  }
  return out;
}

const decodes = (s: string) => {
  try {
    decodeURIComponent(s);
    return true;
  } catch {
    return false;
  }
};

/** Is this the router's "Failed to decode param" error? */
export function isUndecodablePath(e: unknown): boolean {
  return e instanceof URIError && (e as { status?: number }).status === 400;
}

/** The name of the route parameter whose segment does not decode (`tableId`), or undefined. */
export function undecodableParam(req: Request): string | undefined {
  const segs = req.path.split("/");
  const bad = segs.findIndex((s) => !decodes(s));
  if (bad < 0) return undefined;
  const stack = (req.app as unknown as { router?: { stack?: Layer[] } }).router?.stack;
  for (const t of templates(stack)) {
    const ts = t.split("/");
    if (ts.length !== segs.length || !ts[bad]?.startsWith(":")) continue;
    if (ts.every((x, i) => x.startsWith(":") || x === segs[i])) return ts[bad]!.slice(1);
  }
  return undefined;
}
