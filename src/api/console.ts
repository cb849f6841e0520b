/**
 * The run console at /console: the page and its two assets, built into console/dist by
 * `npm run build:console` (committed, so a clean clone serves it without build tools).
 * The page's routes live in the URL fragment (#/runs/…), so one HTML document serves them all.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import express, { Router } from "express";
import { consoleCsp } from "./security.js";

export const CONSOLE_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "console", "dist");

export function consoleRouter(dir = CONSOLE_DIR): Router {
  const r = Router();
  if (!existsSync(join(dir, "index.html"))) {
    r.use(
      "/console",
      (_req, res) => void res.status(503).type("text/plain").send("console not built: run npm run build:console"),
    );
    return r;
  }
  const csp = consoleCsp();
  // asset names carry no hash: revalidate each time (cheap with ETag / Last-Modified)
  const noCache = {
    etag: true,
    lastModified: true,
    index: false,
    fallthrough: true,
    cacheControl: true,
    maxAge: 0,
    setHeaders: (res: express.Response) => res.setHeader("Cache-Control", "no-cache"),
  };
  r.get(["/console", "/console/"], csp, (_req, res) => {
    res.setHeader("Cache-Control", "no-cache");
    res.sendFile(join(dir, "index.html"));
  });
  r.use("/console/assets", csp, express.static(dir, noCache));
  return r;
}
