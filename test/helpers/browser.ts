/**
 * Headless Chromium from Debian (/usr/bin/chromium, or CHROMIUM_PATH) driven by playwright-core:
 * never a downloaded browser. Pages record console errors, page errors and CSP violations.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
/**
 * Why the browser tests cannot run on this machine, or undefined. Chromium is not something a
 * newcomer's machine is assumed to have ("no services needed"): without it, outside CI, the
 * browser tests are skipped with this message. In CI (CI set, as .ci/run does) they always run, and
 * a missing browser fails them.
 */
export const BROWSER_SKIP: string | undefined =
  existsSync(CHROMIUM) || (process.env.CI && !/^(0|false)$/i.test(process.env.CI))
    ? undefined
    : `these tests need Chromium at ${CHROMIUM} (apt-get update && apt-get install -y chromium, or set CHROMIUM_PATH); skipped because it is missing and CI is not set`;

export const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export interface Browser {
  context: BrowserContext;
  /** Everything that went wrong in any page: console errors, uncaught errors, CSP violations. */
  problems: string[];
  /** `expected`: console errors this page is meant to cause (e.g. a 401 for a wrong key). */
  page(viewport?: { width: number; height: number }, expected?: RegExp): Promise<Page>;
  close(): Promise<void>;
}

// collected in the page (a string, so the Node-side type check needs no DOM types)
const RECORD_CSP = `
  window.__cspViolations = [];
  document.addEventListener("securitypolicyviolation", (e) => {
    window.__cspViolations.push(e.violatedDirective + " " + e.blockedURI + " " + (e.sample || ""));
    console.error("CSP violation: " + e.violatedDirective + " " + e.blockedURI);
  });
`;

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`${CHROMIUM} is missing: apt-get update && apt-get install -y chromium (or set CHROMIUM_PATH)`);
  const dir = await mkdtemp(join(tmpdir(), "console-chromium-"));
  const context = await chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport: { width: 1280, height: 900 },
  });
  await context.addInitScript(RECORD_CSP);
  // the machine is shared and loaded: waits end on conditions, these are only upper bounds
  context.setDefaultTimeout(60_000);
  const problems: string[] = [];
  return {
    context,
    problems,
    async page(viewport, expected) {
      const p = await context.newPage();
      if (viewport) await p.setViewportSize(viewport);
      p.on("console", (m) => {
        if (m.type() === "error" && !(expected && expected.test(m.text())))
          problems.push(`console error on ${p.url()}: ${m.text()}`);
      });
      p.on("pageerror", (e) => problems.push(`page error on ${p.url()}: ${e.message}`));
      return p;
    },
    async close() {
      await context.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export async function cspViolations(page: Page): Promise<string[]> {
  return (await page.evaluate("window.__cspViolations || []")) as string[];
}
