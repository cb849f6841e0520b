/**
 * The run console end to end: headless Chromium (Debian's) against the real server on Postgres
 * (embedded, or DATABASE_URL), signed in with a workspace key. Screenshots go to
 * test-artifacts/console/ (git-ignored).
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Page } from "playwright-core";
import { defineSkill } from "../src/skills/contract.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, newKey, serveApi, until, type ApiUnderTest } from "./helpers/api.js";
import { BROWSER_SKIP, cspViolations, launchBrowser, type Browser } from "./helpers/browser.js";
import { EffectLedger, effectSkill } from "./helpers/skills.js";

const POLL = { timeout: 30_000, interval: 100 };
const ARTIFACTS = join(process.cwd(), "test-artifacts", "console");
mkdirSync(ARTIFACTS, { recursive: true });

/** A records-creating write that needs confirmation and previews the records (like QTable's). */
class Table {
  readonly rows = new Map<string, { title: string; estimateDays: number }>();
  created = 0;
  private next = 1;
  insert(r: { title: string; estimateDays: number }): string {
    const id = `rec_${this.next++}`;
    this.rows.set(id, r);
    this.created++;
    return id;
  }
}
function createRecords(table: Table) {
  return defineSkill({
    name: "demo.create_records",
    description: "creates rows in a table",
    input: z
      .object({
        tableId: z.string().min(1),
        records: z.array(z.object({ title: z.string().min(1), estimateDays: z.number().int().min(0) }).strict()).min(1),
      })
      .strict(),
    output: z.object({ ids: z.array(z.string()) }),
    sideEffects: "write",
    idempotent: false,
    requiresConfirmation: true,
    preview: (a: { tableId: string; records: unknown[] }) => ({ tableId: a.tableId, records: a.records }),
    async execute(args) {
      return { ids: args.records.map((r) => table.insert(r)) };
    },
    createdRecords: {
      list: (o: { ids: string[] }) => o.ids.map((id) => ({ resource: "rows", id })),
      async delete(records: { id: string }[]) {
        for (const r of records) table.rows.delete(r.id);
      },
    },
  });
}

const records = [
  { title: "Draft the approval flow", estimateDays: 3 },
  { title: "Review with legal", estimateDays: 2 },
];

// a browser and a database on a shared 2-core machine: generous limits, no timed assertions
if (BROWSER_SKIP) console.warn(`test/console.test.ts: ${BROWSER_SKIP}`);
describe.skipIf(BROWSER_SKIP !== undefined)(
  `run console in Chromium (${postgresBackend.name})${BROWSER_SKIP ? ` [skipped: ${BROWSER_SKIP}]` : ""}`,
  { timeout: 120_000 },
  () => {
    let api: ApiUnderTest;
    let closeRuntime: () => Promise<void>;
    let key: string;
    let browser: Browser;
    const table = new Table();
    const ledger = new EffectLedger();

    const post = (path: string, body: unknown) => call(api.url, "POST", path, { key, body });
    const run = async (plan: unknown) => {
      const r = await post("/api/tool-chains/run", { plan });
      expect(r.status, r.text).toBe(200);
      return r.body as { runId: string; status: string };
    };
    const view = async (runId: string) => (await call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key })).body;

    async function signedIn(path = "#/runs", viewport?: { width: number; height: number }): Promise<Page> {
      const page = await browser.page(viewport);
      await page.goto(`${api.url}/console`);
      await page.getByLabel("API key").fill(key);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("navigation", { name: "Main" }).waitFor();
      await page.evaluate(`location.hash = ${JSON.stringify(path)}`);
      return page;
    }

    beforeAll(async () => {
      const o = await postgresBackend.open({
        skills: [createRecords(table), effectSkill(ledger, { name: "demo.effect", compensationFailures: 1 })],
      });
      closeRuntime = o.close;
      api = await serveApi(o.runtime, o.db);
      // the runs below remove a confirmation (requireConfirmation: false) for a compensable write
      key = await newKey(api.access, "console-ws", undefined, ["relax_confirmation"]);
      browser = await launchBrowser();
    }, 180_000);

    afterAll(async () => {
      await browser?.close();
      await api?.close();
      await closeRuntime?.();
    });

    it("serves the console with a strict CSP and security headers on the whole app", async () => {
      const page = await fetch(`${api.url}/console`);
      expect(page.status).toBe(200);
      const csp = page.headers.get("content-security-policy")!;
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("style-src 'self'");
      expect(csp).toContain("connect-src 'self'");
      expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|https?:/);
      expect(csp).toContain("require-trusted-types-for 'script'");
      const html = await page.text();
      expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/); // no inline script
      for (const path of ["/console", "/console/assets/console.js", "/healthz", "/api/skills"]) {
        const r = await fetch(api.url + path);
        expect(r.headers.get("x-content-type-options"), path).toBe("nosniff");
        expect(r.headers.get("referrer-policy"), path).toBe("no-referrer");
        expect(r.headers.get("x-frame-options"), path).toBe("DENY");
        expect(r.headers.get("cross-origin-opener-policy"), path).toBe("same-origin");
        expect(r.headers.get("content-security-policy"), path).toContain("frame-ancestors 'none'");
      }
      expect((await fetch(`${api.url}/api/skills`)).status).toBe(401);
      expect((await fetch(`${api.url}/console/assets/missing.js`)).status).toBe(404);
    });

    it("refuses a wrong key, then lists runs with status filter and live updates", async () => {
      const done = await run({
        goal: "A finished run",
        steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: 1 } }],
      });
      expect(done.status).toBe("completed");
      // the refused sign-in's 401 is the one console error the browser itself logs on purpose
      const page = await browser.page(undefined, /status of 401/);
      await page.goto(`${api.url}/console`);
      await page.getByLabel("API key").fill("tck_not_a_real_key_000000000000000000");
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByText("This key or token is unknown, revoked or expired.").waitFor();
      await page.getByLabel("API key").fill(key);
      await page.getByRole("button", { name: "Sign in" }).click();
      const rows = page.getByTestId("runs-table").locator("tbody tr[data-run]");
      await rows.first().waitFor();
      await expect.poll(() => rows.count(), POLL).toBeGreaterThanOrEqual(1);
      await page.locator(`tr[data-run="${done.runId}"]`).getByText("1/1 done").waitFor();

      // a run started elsewhere appears without a reload (polling), waiting for a decision
      const waiting = await run({
        goal: "Waits for an approver",
        steps: [{ stepId: "ask", skillName: "core.pass", arguments: { value: 2 }, requireConfirmation: true }],
      });
      expect(waiting.status).toBe("waiting_confirmation");
      await page
        .locator(`tr[data-run="${waiting.runId}"][data-status="waiting_confirmation"]`)
        .waitFor({ timeout: 15_000 });

      await page.getByLabel("Status").selectOption("completed");
      await expect.poll(async () => page.locator(`tr[data-run="${waiting.runId}"]`).count(), POLL).toBe(0);
      await page.locator(`tr[data-run="${done.runId}"]`).waitFor();
      await page.getByLabel("Status").selectOption("");
      await page.locator(`tr[data-run="${waiting.runId}"]`).waitFor();
      await page.screenshot({ path: join(ARTIFACTS, "runs-list.png"), fullPage: true });

      // keyboard: the filter and the run links are reachable with Tab
      await page.getByLabel("Status").focus();
      await page.keyboard.press("Tab");
      expect(await page.evaluate("document.activeElement && document.activeElement.tagName")).toBe("A");
      // the key is kept in this tab's sessionStorage only: nothing in localStorage, no cookie
      expect(
        await page.evaluate(
          "JSON.stringify([Object.keys(localStorage), document.cookie, Object.values(sessionStorage)])",
        ),
      ).toBe(JSON.stringify([[], "", [key]]));
      await page.close();
    });

    it("approves a confirmation with an edited argument (validated against the skill's schema) and watches the DAG and timeline reach completed", async () => {
      const r = await run({
        goal: "Plan the approval system",
        steps: [
          { stepId: "prepare", skillName: "core.wait", arguments: { ms: 50, value: { table: "tbl_approvals" } } },
          {
            stepId: "create",
            skillName: "demo.create_records",
            dependsOn: ["prepare"],
            arguments: { tableId: { $ref: "steps.prepare.table" }, records },
          },
          {
            stepId: "report",
            skillName: "core.pass",
            dependsOn: ["create"],
            arguments: { value: { created: { $ref: "steps.create.ids" } } },
          },
          { stepId: "side", skillName: "core.wait", arguments: { ms: 30, value: "independent branch" } },
        ],
      });
      expect(r.status).toBe("waiting_confirmation");
      const page = await signedIn(`#/runs/${r.runId}`);
      const node = (id: string) => page.locator(`[data-testid=dag] .dag-node[data-step="${id}"]`);
      await node("create").and(page.locator('[data-status="waiting_confirmation"]')).waitFor();
      await node("prepare").and(page.locator('[data-status="completed"]')).waitFor();
      expect(await node("report").getAttribute("data-status")).toBe("pending");
      // the timeline shows the wait for confirmation
      await page.locator('[data-testid=timeline] rect.tl-waiting[data-step="create"]').waitFor();

      await page.locator(".pending").getByRole("button", { name: "Review…" }).click();
      const dialog = page.getByRole("dialog");
      await dialog.waitFor();
      // the preview's records are a table
      const preview = dialog.locator("table.records");
      await expect.poll(() => preview.locator("tbody tr").count(), POLL).toBe(2);
      expect(await preview.locator("thead th").allTextContents()).toEqual(["#", "title", "estimateDays"]);
      expect(await preview.locator("tbody tr").first().textContent()).toContain("Draft the approval flow");
      await page.screenshot({ path: join(ARTIFACTS, "decision-dialog.png") });

      await dialog.getByText("Arguments (edit before approving)").click();
      const editor = dialog.getByLabel(/Arguments \(JSON/);
      const approve = dialog.getByRole("button", { name: "Approve" });
      const args = JSON.parse(await editor.inputValue());
      expect(args).toEqual({ tableId: "tbl_approvals", records });
      // invalid against the schema: the problem is named and Approve is disabled
      await editor.fill(JSON.stringify({ ...args, records: [{ title: "x", estimateDays: "three" }] }, null, 2));
      await dialog.getByText(/\/records\/0\/estimateDays/).waitFor();
      expect(await approve.isDisabled()).toBe(true);
      await editor.fill("{ not json");
      await dialog.getByText(/not valid JSON/).waitFor();
      expect(await approve.isDisabled()).toBe(true);
      const edited = { ...args, records: [{ title: "Draft the approval flow v2", estimateDays: 5 }, records[1]] };
      await editor.fill(JSON.stringify(edited, null, 2));
      await dialog.getByText("Valid against the skill's schema.").waitFor();
      await dialog.getByLabel(/Comment/).fill("ok with a longer estimate");
      const sent = page.waitForRequest((q) => q.method() === "POST" && q.url().endsWith(`/runs/${r.runId}/confirm`));
      await approve.click();
      // exactly the edited arguments, for the wait the dialog was opened on
      expect((await sent).postDataJSON()).toEqual({
        stepId: "create",
        decision: "approve",
        arguments: edited,
        comment: "ok with a longer estimate",
        round: 0,
        wait: false,
      });
      await dialog.waitFor({ state: "detached" });

      for (const id of ["prepare", "create", "report", "side"])
        await node(id).and(page.locator('[data-status="completed"]')).waitFor();
      await page.getByTestId("run-status").getByText("completed").waitFor();
      // timeline: every step has a finished attempt bar, the wait ended approved
      for (const id of ["prepare", "create", "report", "side"])
        await page
          .locator(`[data-testid=timeline] rect.tl-attempt[data-step="${id}"][data-outcome="completed"]`)
          .waitFor();
      await page
        .locator('[data-testid=timeline] rect.tl-waiting[data-step="create"][data-outcome="approved"]')
        .waitFor();
      // the event log shows the decision; the step details show the edited input and the output
      await page.locator('[data-testid=event-log] tr[data-type="step_confirmed"]').getByText('"edited":true').waitFor();
      await node("create").click();
      const details = page.locator('details.step[data-step="create"]');
      expect(await details.getAttribute("open")).not.toBeNull();
      await details.getByText("Draft the approval flow v2").first().waitFor();
      await page.screenshot({ path: join(ARTIFACTS, "run-page.png"), fullPage: true });

      const v = await view(r.runId);
      expect(v.status).toBe("completed");
      expect(v.steps.find((s: { stepId: string }) => s.stepId === "create").input.records[0]).toEqual({
        title: "Draft the approval flow v2",
        estimateDays: 5,
      });
      expect([...table.rows.values()].map((x) => x.title)).toContain("Draft the approval flow v2");
      const events = (await call(api.url, "GET", `/api/tool-chains/runs/${r.runId}/events`, { key })).body.events;
      const confirmed = events.filter((e: { type: string }) => e.type === "step_confirmed");
      expect(confirmed).toHaveLength(1);
      expect(confirmed[0].data).toMatchObject({
        decision: "approve",
        edited: true,
        comment: "ok with a longer estimate",
      });
      await page.close();
    });

    it("rejects from the Decisions view and shows the compensation", async () => {
      const before = table.rows.size;
      const r = await run({
        goal: "Rejected import",
        onFailure: "fail_fast",
        steps: [
          {
            stepId: "import",
            skillName: "demo.create_records",
            requireConfirmation: false,
            arguments: { tableId: "tbl_x", records },
          },
          {
            stepId: "publish",
            skillName: "core.pass",
            dependsOn: ["import"],
            requireConfirmation: true,
            arguments: { value: { $ref: "steps.import.ids" } },
          },
        ],
      });
      expect(r.status).toBe("waiting_confirmation");
      expect(table.rows.size).toBe(before + 2);
      const page = await signedIn("#/decisions");
      const row = page.locator(`[data-testid=decisions-table] tr[data-run="${r.runId}"][data-step="publish"]`);
      await row.waitFor();
      expect(await row.getAttribute("data-kind")).toBe("confirmation");
      await row.getByRole("button", { name: "Review…" }).click();
      const dialog = page.getByRole("dialog");
      await dialog.getByLabel(/Comment/).fill("not this week");
      await dialog.getByRole("button", { name: "Reject" }).click();
      await dialog.waitFor({ state: "detached" });
      await page
        .getByTestId("toast")
        .getByText(/Reject: step publish/)
        .waitFor();
      await expect.poll(() => row.count(), POLL).toBe(0);

      await page.evaluate(`location.hash = "#/runs/${r.runId}"`);
      await page.getByTestId("run-status").getByText("rolled back").waitFor({ timeout: 15_000 });
      await page.locator('.dag-node[data-step="import"][data-status="rolled_back"]').waitFor();
      await page.locator('.dag-node[data-step="publish"][data-status="failed"]').waitFor();
      await page
        .locator('[data-testid=timeline] rect.tl-compensation[data-step="import"][data-outcome="rolled_back"]')
        .waitFor();
      await page
        .locator('[data-testid=timeline] rect.tl-waiting[data-step="publish"][data-outcome="rejected"]')
        .waitFor();
      const imp = page.locator('details.step[data-step="import"]');
      await imp.locator(":scope > summary").click();
      await imp.getByTestId("rollback").getByText("rolled back").waitFor();
      const pub = page.locator('details.step[data-step="publish"]');
      await pub.locator(":scope > summary").click();
      await pub
        .getByTestId("rejected")
        .getByText(/Rejected by .*not this week/)
        .waitFor();
      expect(table.rows.size).toBe(before);
      await page.close();
    });

    it("answers a failed strict compensation (retry) from the Decisions view", async () => {
      const r = await run({
        goal: "Strict rollback",
        rollbackMode: "strict",
        steps: [
          { stepId: "write", skillName: "demo.effect", arguments: { label: "w1" }, retry: { maxAttempts: 1 } },
          {
            stepId: "boom",
            skillName: "core.fail",
            dependsOn: ["write"],
            onFailure: "fail_fast",
            arguments: { code: "INVALID_INPUT" },
          },
        ],
      });
      expect(r.status).toBe("rollback_failed");
      const page = await signedIn("#/decisions");
      const row = page.locator(`[data-testid=decisions-table] tr[data-run="${r.runId}"][data-step="write"]`);
      await row.waitFor();
      expect(await row.getAttribute("data-kind")).toBe("compensation");
      await row.getByRole("button", { name: "Review…" }).click();
      const dialog = page.getByRole("dialog");
      await dialog.getByText("compensation failed").first().waitFor();
      expect(await dialog.getByRole("button").allTextContents()).toEqual(
        expect.arrayContaining(["Retry the compensation", "Skip (leave it undone)", "Stop the rollback"]),
      );
      await dialog.getByRole("button", { name: "Retry the compensation" }).click();
      await dialog.waitFor({ state: "detached" });
      await expect.poll(() => row.count(), POLL).toBe(0);
      await until(async () => (await view(r.runId)).status === "rolled_back", 15_000);
      expect(ledger.compensations.get(`${r.runId}:write:compensate`)).toBe(1);

      await page.evaluate(`location.hash = "#/runs/${r.runId}"`);
      await page.getByTestId("run-status").getByText("rolled back").waitFor();
      await page
        .locator('[data-testid=timeline] rect.tl-decision[data-step="write"][data-outcome="approved"]')
        .waitFor();
      await page
        .locator('[data-testid=timeline] rect.tl-compensation[data-step="write"][data-outcome="rolled_back"]')
        .waitFor();
      await page.close();
    });

    it("renders run-provided strings as text: a <script> in a step output does not run and breaks no CSP rule", async () => {
      const evil = {
        note: "<script>window.__xss = 1</script>",
        html: '<img src="x" onerror="window.__xss = 2">',
        rows: [{ name: "<b>bold</b>", link: "javascript:alert(1)" }],
      };
      const r = await run({
        goal: "<script>window.__xss = 3</script>",
        steps: [{ stepId: "out", skillName: "core.pass", arguments: { value: evil } }],
      });
      const page = await signedIn(`#/runs/${r.runId}`);
      await page.locator('.dag-node[data-step="out"][data-status="completed"]').waitFor();
      await page.getByRole("heading", { name: "<script>window.__xss = 3</script>" }).waitFor();
      // keyboard: a DAG node is a button; Enter opens its step's details
      await page.locator('.dag-node[data-step="out"]').focus();
      await page.keyboard.press("Enter");
      const details = page.locator('details.step[data-step="out"][open]');
      await details.waitFor();
      await details
        .getByTestId("output")
        .locator("table.records td")
        .getByText("<b>bold</b>", { exact: true })
        .waitFor();
      await details.getByTestId("output").locator("summary").click();
      await details.getByTestId("output").getByText("<script>window.__xss = 1</script>").first().waitFor();
      expect(await page.locator("main script, main img, main b").count()).toBe(0);
      expect(await page.evaluate("window.__xss")).toBeUndefined();
      await page.locator('[data-testid=event-log] tr[data-type="step_completed"]').waitFor();
      expect(await cspViolations(page)).toEqual([]);
      await page.close();
    });

    it("cancels a running run from its page", async () => {
      const started = await post("/api/tool-chains/run", {
        plan: {
          goal: "Long job",
          steps: [
            { stepId: "long", skillName: "core.wait", arguments: { ms: 120_000 } },
            { stepId: "later", skillName: "core.pass", dependsOn: ["long"], arguments: { value: 1 } },
          ],
        },
        wait: false,
      });
      expect(started.status).toBe(202);
      const runId = started.body.runId as string;
      const page = await signedIn(`#/runs/${runId}`);
      await page.locator('.dag-node[data-step="long"][data-status="running"]').waitFor();
      await page.getByRole("button", { name: "Cancel run" }).click();
      await page.getByRole("dialog").getByRole("button", { name: "Cancel the run" }).click();
      await page.getByTestId("run-status").getByText("cancelled").waitFor();
      await page.locator('.dag-node[data-step="long"][data-status="cancelled"]').waitFor();
      await page.locator('.dag-node[data-step="later"][data-status="cancelled"]').waitFor();
      await page
        .locator('[data-testid=timeline] rect.tl-attempt[data-step="long"][data-outcome="cancelled"]')
        .waitFor();
      expect((await view(runId)).status).toBe("cancelled");
      await page.close();
    });

    it("fits a phone-width screen and a 1280 px screen without horizontal page scroll", async () => {
      const any = (await call(api.url, "GET", "/api/tool-chains/runs?limit=1", { key })).body.runs[0].runId;
      const page = await signedIn("#/runs", { width: 390, height: 800 });
      for (const width of [390, 1280]) {
        await page.setViewportSize({ width, height: 800 });
        for (const path of ["#/runs", `#/runs/${any}`, "#/decisions"]) {
          await page.evaluate(`location.hash = ${JSON.stringify(path)}`);
          await page.locator("main h1").first().waitFor();
          await page
            .locator(
              path === "#/runs"
                ? "tr[data-run]"
                : path === "#/decisions"
                  ? "[data-testid=decisions-table] tbody tr"
                  : ".dag-node",
            )
            .first()
            .waitFor();
          const overflow = (await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
          expect(overflow, `${path} at ${width}px`).toBeLessThanOrEqual(1);
          if (width === 390 && path !== "#/decisions")
            await page.screenshot({
              path: join(ARTIFACTS, `${path === "#/runs" ? "runs-list" : "run-page"}-phone.png`),
              fullPage: true,
            });
        }
      }
      expect(await cspViolations(page)).toEqual([]);
      await page.close();
    });

    it("reported no console errors, page errors or CSP violations on any page", () => {
      expect(browser.problems).toEqual([]);
    });
  },
);
