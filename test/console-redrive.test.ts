/**
 * The console in Chromium (Debian's, driven by playwright-core) for what issue #26 adds to it: a
 * failed run's page offers Redrive (to an operator, not to an approver), asks first, and the run
 * completes; a refused redrive (a rolled-back run) shows its code and message in the dialog. And a
 * confirmation whose skill was redeployed while it waited: the decision dialog says the version
 * changed, with the migrated arguments and the preview that now differs.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import type { Page } from "playwright-core";
import { ErrorCode, ToolchainError } from "../src/kernel/errors.js";
import { createRuntime } from "../src/runtime/runtime.js";
import { defineSkill } from "../src/skills/contract.js";
import { MemoryRunStore } from "../src/store/memory-run-store.js";
import { MemoryAccessStore } from "../src/store/access-store.js";
import { call, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { BROWSER_SKIP, cspViolations, launchBrowser, type Browser } from "./helpers/browser.js";

const WS = "ws-redrive";
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
/** axe-core in the page (over the devtools protocol: the page's CSP allows no inline script). */
async function axe(page: Page, what: string): Promise<void> {
  if (!(await page.evaluate("typeof window.axe === 'object'"))) await page.evaluate(AXE);
  const r = (await page.evaluate(
    `axe.run(document, { resultTypes: ["violations"] }).then(r => r.violations.map(v => v.id + " (" + v.impact + "): " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(" | ")))`,
  )) as string[];
  expect(r, `axe on ${what}`).toEqual([]);
}
let up = false;
const provider = defineSkill({
  name: "t.provider",
  description: "fails while the provider is down",
  input: z.object({ label: z.string() }),
  sideEffects: "write",
  idempotent: true,
  async execute(a) {
    if (!up) throw new ToolchainError(ErrorCode.EXECUTION_FAILED, "provider down", { effectStarted: false });
    return { label: a.label };
  },
});
const undoable = defineSkill({
  name: "t.undoable",
  description: "an effect that can be undone",
  input: z.object({}),
  sideEffects: "write",
  idempotent: true,
  execute: async () => ({ done: true }),
  async compensate() {},
});
const notify = { name: "t.notify", description: "sends a notice", sideEffects: "external" as const, idempotent: true };
const notifyV1 = defineSkill({
  ...notify,
  requiresConfirmation: true,
  input: z.object({ label: z.string() }),
  preview: (a) => ({ message: `notify ${a.label}` }),
  execute: async (a) => ({ sent: a.label }),
});
const notifyV2 = defineSkill({
  ...notify,
  requiresConfirmation: true,
  version: "2.0.0",
  compatibleWith: ["1.0.0"],
  migrate: (a) => ({ name: String(a.label) }),
  input: z.object({ name: z.string() }),
  preview: (a) => ({ message: `notify ${a.name}`, channel: "email" }),
  execute: async (a) => ({ sent: a.name }),
});

if (BROWSER_SKIP) console.warn(`test/console-redrive.test.ts: ${BROWSER_SKIP}`);
describe.skipIf(BROWSER_SKIP !== undefined)(
  "redrive and redeployed confirmations in the console",
  { timeout: 180_000 },
  () => {
    let api: ApiUnderTest;
    let browser: Browser;
    const keys: Record<string, string> = {};
    let waitingRun = "";

    beforeAll(async () => {
      const checkpointer = new MemorySaver();
      const store = new MemoryRunStore();
      // the previous deploy left a confirmation waiting under version 1.0.0
      const before = createRuntime({ skills: [notifyV1], checkpointer, store });
      const plan = { steps: [{ stepId: "n", skillName: "t.notify", arguments: { label: "team" } }] };
      waitingRun = (await before.run(plan, { workspaceId: WS }).result).runId;
      const access = new MemoryAccessStore();
      api = await serveApi(createRuntime({ skills: [provider, undoable, notifyV2], checkpointer, store }), undefined, {
        access,
      });
      await access.ensureWorkspace(WS, {});
      keys.olga = (await access.createKey(WS, { user: { id: "olga", name: "Olga Ops", roles: ["operator"] } })).key;
      keys.ana = (await access.createKey(WS, { user: { id: "ana", name: "Ana Lopez", roles: ["approver"] } })).key;
      browser = await launchBrowser();
    }, 180_000);
    afterAll(async () => {
      await browser?.close();
      await api?.close();
    });

    const start = async (plan: unknown) => {
      const r = await call(api.url, "POST", "/api/tool-chains/run", { key: keys.olga, body: { plan } });
      return r.body as { runId: string; status: string };
    };
    async function signedIn(who: string, path: string, expected?: RegExp): Promise<Page> {
      const page = await browser.page({ width: 1280, height: 860 }, expected);
      await page.goto(`${api.url}/console`);
      await page.getByLabel("API key or sign-in token").fill(keys[who]!);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("navigation", { name: "Main" }).waitFor();
      await page.evaluate(`location.hash = ${JSON.stringify(path)}`);
      return page;
    }

    it("redrives a failed run after asking; an approver is not offered it; a refusal shows its code", async () => {
      const failed = await start({
        steps: [
          { stepId: "a", skillName: "core.pass", arguments: { value: 1 } },
          {
            stepId: "b",
            skillName: "t.provider",
            dependsOn: ["a"],
            arguments: { label: "b" },
            retry: { maxAttempts: 1 },
          },
        ],
      });
      expect(failed.status).toBe("failed");

      const approver = await signedIn("ana", `#/runs/${failed.runId}`);
      await approver.getByTestId("run-outcome").or(approver.locator(".badge")).first().waitFor();
      await approver.getByRole("heading", { level: 2, name: "Plan" }).waitFor();
      expect(await approver.getByTestId("redrive").isHidden()).toBe(true);
      await approver.close();

      // the refused redrive below answers 409, which Chromium logs
      const page = await signedIn("olga", `#/runs/${failed.runId}`, /status of 409/);
      const button = page.getByRole("button", { name: "Redrive…" });
      await button.waitFor();
      // asked first: leaving it changes nothing
      await button.click();
      const dialog = page.getByRole("dialog", { name: `Redrive run ${failed.runId}?` });
      await dialog.getByText("Completed steps keep their outputs").waitFor();
      await axe(page, "the redrive dialog");
      await dialog.getByRole("button", { name: "Leave it failed" }).click();
      await dialog.waitFor({ state: "detached" });
      expect(
        (await call(api.url, "GET", `/api/tool-chains/runs/${failed.runId}`, { key: keys.olga })).body.status,
      ).toBe("failed");

      up = true;
      await button.click();
      await page.getByRole("dialog").getByRole("button", { name: "Redrive the run" }).click();
      await page.getByRole("dialog").waitFor({ state: "detached" });
      const viewOf = async () =>
        (await call(api.url, "GET", `/api/tool-chains/runs/${failed.runId}`, { key: keys.olga })).body;
      await expect.poll(async () => (await viewOf()).status, { timeout: 30_000 }).toBe("completed");
      await page.locator(".page-head .badge", { hasText: "completed" }).waitFor();
      expect(await button.isHidden()).toBe(true);
      const view = await viewOf();
      expect(view.redrives).toEqual([expect.objectContaining({ n: 1, via: "console", steps: ["b"] })]);

      // a run whose completed step was compensated: the API refuses, the dialog says why
      up = false;
      const rolled = await start({
        onFailure: "fail_fast",
        steps: [
          { stepId: "a", skillName: "t.undoable", arguments: {} },
          {
            stepId: "b",
            skillName: "t.provider",
            dependsOn: ["a"],
            arguments: { label: "b" },
            retry: { maxAttempts: 1 },
          },
        ],
      });
      expect(rolled.status).toBe("rolled_back");
      await page.evaluate(`location.hash = ${JSON.stringify(`#/runs/${rolled.runId}`)}`);
      const again = page.getByRole("button", { name: "Redrive…" });
      await again.waitFor();
      await again.click();
      const refused = page.getByRole("dialog");
      await refused.getByRole("button", { name: "Redrive the run" }).click();
      await expect.poll(() => refused.getByTestId("redrive-error").textContent()).toContain("REDRIVE_COMPENSATED: ");
      await axe(page, "a refused redrive");
      expect(await refused.getByRole("button", { name: "Redrive the run" }).isEnabled()).toBe(true);
      await refused.getByRole("button", { name: "Leave it failed" }).click();
      expect(await cspViolations(page)).toEqual([]);
      await page.close();
    });

    it("a confirmation redeployed while it waited: the dialog says the version changed and what now differs", async () => {
      const page = await signedIn("ana", `#/runs/${waitingRun}`);
      await page.locator(".pending").getByRole("button", { name: "Review…" }).click();
      const notice = page.getByRole("dialog").getByTestId("version-changed");
      await notice.waitFor();
      const text = (await notice.textContent()) ?? "";
      expect(text).toContain("t.notify 1.0.0");
      expect(text).toContain("2.0.0");
      expect(text).toContain("The preview would now differ");
      expect(text).toContain("channel");
      await axe(page, "the decision dialog after a deploy");
      // the editor holds the arguments as the new version runs them
      expect(JSON.parse(await page.getByTestId("decision-editor").inputValue())).toEqual({ name: "team" });
      await page.getByRole("dialog").getByRole("button", { name: "Approve" }).click();
      await page.getByRole("dialog").waitFor({ state: "detached" });
      await expect
        .poll(
          async () =>
            (await call(api.url, "GET", `/api/tool-chains/runs/${waitingRun}`, { key: keys.ana })).body.status,
        )
        .toBe("completed");
      expect(browser.problems).toEqual([]);
      await page.close();
    });
  },
);
