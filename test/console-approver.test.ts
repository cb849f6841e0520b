/**
 * The approver's experience in Chromium (Debian's, driven by playwright-core) against the real
 * server on Postgres, signed in with personal keys: the decision dialog opens at a summary of the
 * effect, edited arguments are previewed by the server with a diff, decisions made elsewhere reach
 * the inbox and an open dialog live, the inbox measures waiting from each step's wait and shows
 * what I may decide, and every page has 0 axe-core violations at 1280 and 390 px. Screenshots of the
 * dialog and the inbox at both widths are written to docs/ (shown in the README).
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Page } from "playwright-core";
import { ErrorCode, ToolchainError } from "../src/kernel/errors.js";
import { defineSkill } from "../src/skills/contract.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, serveApi, until, type ApiUnderTest } from "./helpers/api.js";
import { BROWSER_SKIP, cspViolations, launchBrowser, type Browser } from "./helpers/browser.js";

const POLL = { timeout: 30_000, interval: 100 };
// the README's screenshots are rewritten only when asked (UPDATE_SCREENSHOTS=1): a test run leaves the checkout as it was
const DOCS = process.env.UPDATE_SCREENSHOTS
  ? join(process.cwd(), "docs")
  : mkdtempSync(join(tmpdir(), "console-shots-"));
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
const WS = "ws-approvers";
const WIDTHS = [1280, 390] as const;

interface Row {
  title: string;
  days: number;
}
/** A table write shaped like QTable's: the preview names the table, counts and lists the rows. */
function writeRows(rows: Map<string, Row>) {
  const input = z
    .object({
      tableId: z.string().min(1),
      rows: z.array(z.object({ title: z.string().min(1), days: z.number().int().min(0) }).strict()).min(1),
    })
    .strict();
  return defineSkill({
    name: "demo.rows.write",
    description: "writes rows into a table",
    input,
    output: z.object({ ids: z.array(z.string()) }),
    sideEffects: "write",
    idempotent: false,
    requiresConfirmation: true,
    preview: (a: z.infer<typeof input>) => ({
      action: "write_records",
      table: { id: a.tableId, name: "Roadmap" },
      count: a.rows.length,
      records: a.rows,
    }),
    async execute(a) {
      return { ids: a.rows.map((r, i) => (rows.set(`${a.tableId}:${rows.size + i}`, r), `${rows.size}`)) };
    },
    createdRecords: {
      list: (o: { ids: string[] }) => o.ids.map((id) => ({ resource: "rows", id })),
      async delete() {},
    },
  });
}
/** An external message that two approvers must approve. */
const announce = defineSkill({
  name: "demo.announce",
  description: "posts a message to a channel",
  input: z.object({ channel: z.string(), message: z.string() }).strict(),
  sideEffects: "external",
  idempotent: false,
  requiresConfirmation: true,
  approval: { roles: ["approver"], quorum: 2 },
  preview: (a: { channel: string; message: string }) => ({
    action: "send_message",
    channel: a.channel,
    message: a.message,
  }),
  async execute(a) {
    return { sent: a.message };
  },
});
/** Fails its first attempt with a transient error, then succeeds. */
const flaky = defineSkill({
  name: "demo.flaky",
  description: "succeeds on the second attempt",
  input: z.object({}).strict(),
  sideEffects: "none",
  idempotent: true,
  async execute(_a, ctx) {
    if (ctx.attempt === 1) throw new ToolchainError(ErrorCode.TRANSIENT, "the provider hiccuped");
    return { ok: true };
  },
});

if (BROWSER_SKIP) console.warn(`test/console-approver.test.ts: ${BROWSER_SKIP}`);
describe.skipIf(BROWSER_SKIP !== undefined)(
  `the approver's console in Chromium (${postgresBackend.name})`,
  { timeout: 180_000 },
  () => {
    let api: ApiUnderTest;
    let closeRuntime: () => Promise<void>;
    let browser: Browser;
    const keys: Record<string, string> = {};
    const rows = new Map<string, Row>();

    const as = (who: string, method: "GET" | "POST", path: string, body?: unknown) =>
      call(api.url, method, path, { key: keys[who], body });
    const start = async (who: string, plan: unknown) => {
      const r = await as(who, "POST", "/api/tool-chains/run", { plan });
      expect(r.status, r.text).toBe(200);
      return r.body.runId as string;
    };

    async function signedIn(who: string, path: string, width: number = 1280): Promise<Page> {
      const page = await browser.page({ width, height: 860 });
      await page.goto(`${api.url}/console`);
      await page.getByLabel("API key or sign-in token").fill(keys[who]!);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("navigation", { name: "Main" }).waitFor();
      await page.evaluate(`location.hash = ${JSON.stringify(path)}`);
      return page;
    }

    /** axe-core in the page (evaluated over the devtools protocol: the page's CSP allows no inline script). */
    async function axe(page: Page, what: string): Promise<void> {
      if (!(await page.evaluate("typeof window.axe === 'object'"))) await page.evaluate(AXE);
      const r = (await page.evaluate(
        `axe.run(document, { resultTypes: ["violations"] }).then(r => r.violations.map(v => v.id + " (" + v.impact + "): " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(" | ")))`,
      )) as string[];
      expect(r, `axe on ${what}`).toEqual([]);
    }

    beforeAll(async () => {
      const o = await postgresBackend.open({ skills: [writeRows(rows), announce, flaky] });
      closeRuntime = o.close;
      api = await serveApi(o.runtime, o.db);
      await api.access.ensureWorkspace(WS);
      const personal = async (
        name: string,
        user: { id: string; name?: string; roles?: ("approver" | "operator" | "admin" | "viewer")[] },
      ) => (keys[name] = (await api.access.createKey(WS, { user })).key);
      await personal("ana", { id: "ana", name: "Ana Lopez", roles: ["approver"] });
      await personal("bob", { id: "bob", name: "Bob Stone", roles: ["approver"] });
      await personal("olga", { id: "olga", name: "Olga Ops", roles: ["operator"] });
      browser = await launchBrowser();
    }, 180_000);

    afterAll(async () => {
      await browser?.close();
      await api?.close();
      await closeRuntime?.();
    });

    const records = [
      { title: "Design the inbox", days: 3 },
      { title: "Phone layout", days: 2 },
    ];

    it("opens at a summary of the effect, previews edited arguments on the server with a diff, then approves them", async () => {
      const runId = await start("olga", {
        goal: "Plan the roadmap",
        steps: [
          { stepId: "write", skillName: "demo.rows.write", arguments: { tableId: "tbl_roadmap", rows: records } },
        ],
      });
      // the phone first: the desktop pass approves
      for (const width of [390, 1280]) {
        const page = await signedIn("ana", `#/runs/${runId}`, width);
        await page.locator(".pending").getByRole("button", { name: "Review…" }).click();
        const dialog = page.getByRole("dialog");
        const summary = dialog.getByTestId("effect-summary");
        await summary.waitFor();
        // focus on the summary, not in an editor; the arguments are collapsed
        await expect.poll(() => page.evaluate("document.activeElement?.dataset?.testid"), POLL).toBe("effect-summary");
        expect(await summary.textContent()).toContain("write records: 2 records into “Roadmap” (tbl_roadmap).");
        expect(await dialog.getByTestId("effect-reversibility").textContent()).toMatch(/^Reversible/);
        expect(await dialog.getByTestId("decision-editor").isVisible()).toBe(false);
        expect(await dialog.evaluate((d) => d.scrollTop)).toBe(0);
        await axe(page, `the decision dialog at ${width} px`);
        await page.screenshot({ path: join(DOCS, `console-decision-${width}.png`) });
        if (width === 390) {
          // the preview table scrolls inside its own focusable region, not letter by letter
          const overflow = (await page.evaluate("document.documentElement.scrollWidth - window.innerWidth")) as number;
          expect(overflow).toBeLessThanOrEqual(1);
          await dialog.getByRole("button", { name: "Close" }).click();
          await page.close();
          continue;
        }
        // edit down to a third row: the server's preview follows, with the changes listed
        await dialog.getByText("Arguments (edit before approving)").click();
        const editor = dialog.getByTestId("decision-editor");
        const edited = { tableId: "tbl_roadmap", rows: [...records, { title: "Axe at both widths", days: 1 }] };
        const previewed = page.waitForRequest(
          (q) => q.method() === "POST" && q.url().endsWith(`/runs/${runId}/steps/write/preview`),
        );
        await editor.fill(JSON.stringify(edited, null, 2));
        expect((await previewed).postDataJSON()).toEqual({ arguments: edited, round: 0 });
        await dialog
          .getByTestId("preview-state")
          .getByText("Preview recomputed by the skill for your edited arguments.")
          .waitFor();
        await expect.poll(() => dialog.getByTestId("preview").locator("table.records tbody tr").count(), POLL).toBe(3);
        expect(await summary.textContent()).toContain("3 records");
        const diff = dialog.getByTestId("diff");
        await diff.getByText("/rows/2").first().waitFor();
        expect(await diff.getByRole("list", { name: "Changed preview" }).textContent()).toContain("/count");
        // invalid for the skill: named locally, Approve disabled, nothing previewed
        await editor.fill(JSON.stringify({ ...edited, rows: [{ title: "x", days: "one" }] }));
        await dialog.getByText(/\/rows\/0\/days/).waitFor();
        expect(await dialog.getByRole("button", { name: "Approve" }).isDisabled()).toBe(true);
        await editor.fill(JSON.stringify(edited, null, 2));
        await expect.poll(() => dialog.getByRole("button", { name: "Approve" }).isDisabled(), POLL).toBe(false);
        const sent = page.waitForRequest((q) => q.method() === "POST" && q.url().endsWith(`/runs/${runId}/confirm`));
        await dialog.getByRole("button", { name: "Approve" }).click();
        const req = await sent;
        expect(req.postDataJSON()).toMatchObject({ stepId: "write", decision: "approve", arguments: edited });
        expect(req.headers()["x-toolchain-client"]).toBe("console");
        await dialog.waitFor({ state: "detached" });
        // focus is managed after the decision, and the run page says who decided, through which surface
        await expect.poll(() => page.evaluate("document.activeElement?.tagName"), POLL).toBe("H1");
        await page.getByTestId("run-status").getByText("completed").waitFor();
        await page.locator('.dag-node[data-step="write"]').click();
        await page
          .locator('details.step[data-step="write"]')
          .getByTestId("decision")
          .getByText(/Approved by Ana Lopez via console/)
          .waitFor();
        await page.close();
      }
      expect([...rows.values()].map((r) => r.title)).toContain("Axe at both widths");
    });

    it("the server's preview refuses what the decision would: bad arguments, another round, a step that does not wait", async () => {
      const runId = await start("olga", {
        steps: [{ stepId: "write", skillName: "demo.rows.write", arguments: { tableId: "t", rows: records } }],
      });
      const path = `/api/tool-chains/runs/${runId}/steps/write/preview`;
      const bad = await as("ana", "POST", path, { arguments: { tableId: "t", rows: [] } });
      expect([bad.status, bad.body.error.code]).toEqual([400, "INVALID_ARGUMENTS"]);
      expect(bad.body.error.message).toContain("demo.rows.write");
      const round = await as("ana", "POST", path, { arguments: { tableId: "t", rows: records }, round: 3 });
      expect([round.status, round.body.error.code]).toEqual([409, "CONFIRMATION_NOT_PENDING"]);
      const other = await as("ana", "POST", `/api/tool-chains/runs/${runId}/steps/nope/preview`, { arguments: {} });
      expect([other.status, other.body.error.code]).toEqual([409, "CONFIRMATION_NOT_PENDING"]);
      const field = await as("ana", "POST", path, { args: {} });
      expect([field.status, field.body.error.code]).toEqual([400, "INVALID_BODY"]);
      const ok = await as("ana", "POST", path, { arguments: { tableId: "t2", rows: records.slice(0, 1) } });
      expect(ok.body).toEqual({
        stepId: "write",
        round: 0,
        skillName: "demo.rows.write",
        ok: true,
        preview: {
          action: "write_records",
          table: { id: "t2", name: "Roadmap" },
          count: 1,
          records: records.slice(0, 1),
        },
      });
      // an operator may not decide, so may not preview a decision either
      expect((await as("olga", "POST", path, { arguments: { tableId: "t", rows: records } })).status).toBe(403);
      // nothing was recorded
      expect((await as("ana", "GET", `/api/tool-chains/runs/${runId}`)).body.pendingConfirmations).toHaveLength(1);
      await as("ana", "POST", `/api/tool-chains/runs/${runId}/cancel`, { reason: "test done" });
    });

    it("inbox: what I may decide, quorum remaining, waiting measured per step, decisions elsewhere live", async () => {
      const runId = await start("olga", {
        goal: "Release 2.0",
        steps: [
          { stepId: "tell", skillName: "demo.announce", arguments: { channel: "#releases", message: "2.0 is out" } },
          { stepId: "rows", skillName: "demo.rows.write", arguments: { tableId: "tbl_rel", rows: records } },
        ],
      });
      const events = (await as("ana", "GET", `/api/tool-chains/runs/${runId}/events`)).body.events as {
        type: string;
        stepId?: string;
        at: string;
      }[];
      const waitedAt = (id: string) =>
        events.find((e) => e.type === "step_waiting_confirmation" && e.stepId === id)!.at;
      // Bob approves the announcement first: 1 of 2
      expect(
        (await as("bob", "POST", `/api/tool-chains/runs/${runId}/confirm`, { stepId: "tell", decision: "approve" }))
          .status,
      ).toBe(200);

      const page = await signedIn("ana", "#/decisions");
      const mine = page.getByTestId("mine");
      expect(await mine.isChecked()).toBe(true);
      await page.getByText("Only what I (Ana Lopez) may decide").waitFor();
      const row = (step: string) =>
        page.locator(`[data-testid=decisions-table] tr[data-run="${runId}"][data-step="${step}"]`);
      await row("tell").waitFor();
      await row("rows").waitFor();
      expect(await row("tell").getByTestId("quorum").textContent()).toBe("1 of 2 approved (Bob Stone)");
      // the count badge in the navigation
      await expect.poll(() => page.getByTestId("pending-count").textContent(), POLL).toMatch(/^\d+ waiting$/);
      // waiting is measured from each step's own wait, not the run's last update (Bob's vote changed it)
      const since = await row("tell").getByTestId("waiting").getAttribute("data-since");
      expect(since).toBe(new Date(Date.parse(waitedAt("tell"))).toISOString());
      await axe(page, "the inbox at 1280 px");
      await page.screenshot({ path: join(DOCS, "console-inbox-1280.png") });
      await page.setViewportSize({ width: 390, height: 860 });
      await axe(page, "the inbox at 390 px");
      await expect
        .poll(async () => {
          const b = await row("rows").getByRole("button", { name: "Review…" }).boundingBox();
          return b ? b.x + b.width <= 390 : "not shown";
        }, POLL)
        .toBe(true);
      await page.screenshot({ path: join(DOCS, "console-inbox-390.png"), fullPage: true });
      await page.setViewportSize({ width: 1280, height: 860 });

      // Ana opens the rows step; Bob rejects it elsewhere: the dialog says so, the row leaves
      await row("rows").getByRole("button", { name: "Review…" }).click();
      const dialog = page.getByRole("dialog");
      await dialog.getByTestId("effect-summary").waitFor();
      expect(
        (
          await as("bob", "POST", `/api/tool-chains/runs/${runId}/confirm`, {
            stepId: "rows",
            decision: "reject",
            comment: "not now",
          })
        ).status,
      ).toBe(200);
      await dialog
        .getByTestId("decided-elsewhere")
        .getByText("Rejected by Bob Stone via rest just now.", { exact: false })
        .waitFor();
      expect(await dialog.getByRole("button", { name: "Approve" }).isDisabled()).toBe(true);
      await expect.poll(() => row("rows").count(), POLL).toBe(0);
      await dialog.getByRole("button", { name: "Close" }).click();
      await dialog.waitFor({ state: "detached" });

      // Ana gives the second approval: the quorum is complete and the row leaves
      await row("tell").getByRole("button", { name: "Review…" }).click();
      await dialog.getByTestId("approvals").getByText("1 of 2 approvals").waitFor();
      await dialog
        .getByTestId("approvals")
        .getByText(/Approved by Bob Stone via rest/)
        .waitFor();
      await dialog.getByRole("button", { name: "Approve" }).click();
      await dialog.waitFor({ state: "detached" });
      await expect.poll(() => row("tell").count(), POLL).toBe(0);
      await until(
        async () =>
          (await as("ana", "GET", `/api/tool-chains/runs/${runId}`)).body.steps.find(
            (s: { stepId: string }) => s.stepId === "tell",
          ).status === "completed",
        20_000,
      );
      const tell = (await as("ana", "GET", `/api/tool-chains/runs/${runId}`)).body.steps.find(
        (s: { stepId: string }) => s.stepId === "tell",
      );
      expect(tell.decision.approvals.map((a: { by: { id: string }; via?: string }) => [a.by.id, a.via])).toEqual([
        ["bob", "rest"],
        ["ana", "console"],
      ]);
      await page.close();
    });

    it("a rejection is an outcome, a recovered retry is not an error, durations leave out the wait, cancel takes a reason; 0 axe violations", async () => {
      const rejected = await start("olga", {
        goal: "Rejected write",
        steps: [
          {
            stepId: "retry",
            skillName: "demo.flaky",
            arguments: {},
            retry: { maxAttempts: 3, backoff: { kind: "fixed", initialMs: 10 } },
          },
          {
            stepId: "write",
            skillName: "demo.rows.write",
            dependsOn: ["retry"],
            arguments: { tableId: "t", rows: records },
          },
        ],
      });
      await as("ana", "POST", `/api/tool-chains/runs/${rejected}/confirm`, {
        stepId: "write",
        decision: "reject",
        comment: "wrong table",
      });
      await until(
        async () =>
          (await as("ana", "GET", `/api/tool-chains/runs/${rejected}`)).body.status !== "waiting_confirmation",
        20_000,
      );
      const page = await signedIn("olga", `#/runs/${rejected}`);
      await page.locator('.dag-node[data-step="write"][data-status="failed"]').waitFor();
      await page.getByTestId("run-outcome").waitFor();
      expect(await page.locator(".error-box").count()).toBe(0);
      await page.locator('details.step[data-step="write"] > summary').click();
      await page
        .locator('details.step[data-step="write"]')
        .getByTestId("rejected")
        .getByText(/Rejected by Ana Lopez via rest.*wrong table/)
        .waitFor();
      const retried = page.locator('details.step[data-step="retry"]');
      await retried.locator(":scope > summary").click();
      expect(await retried.getAttribute("data-status")).toBe("completed");
      await retried
        .getByTestId("recovered-error")
        .getByText(/An earlier attempt failed \(TRANSIENT\)/)
        .waitFor();
      expect(await retried.locator(".error-box").count()).toBe(0);
      // graph labels fit: the status has its own line and a short word
      const label = await page.locator('.dag-node[data-step="write"]').getAttribute("aria-label");
      expect(label).toBe("write demo.rows.write failed");
      for (const width of WIDTHS) {
        await page.setViewportSize({ width, height: 860 });
        await axe(page, `the run page at ${width} px`);
        for (const path of ["#/runs", "#/decisions"]) {
          await page.evaluate(`location.hash = ${JSON.stringify(path)}`);
          await page.locator("main h1").first().waitFor();
          // a page change moves focus to its heading
          await expect.poll(() => page.evaluate("document.activeElement?.tagName"), POLL).toBe("H1");
          await page
            .locator(path === "#/runs" ? "tr[data-run]" : "[data-testid=decisions-table] tbody tr")
            .first()
            .waitFor();
          await axe(page, `${path} at ${width} px`);
        }
        await page.evaluate(`location.hash = "#/runs/${rejected}"`);
        await page.locator('.dag-node[data-step="write"]').waitFor();
      }
      await page.setViewportSize({ width: 1280, height: 860 });

      // durations: the waiting step's time waiting for a person is not its working time
      const waitRun = await start("olga", {
        steps: [{ stepId: "w", skillName: "demo.rows.write", arguments: { tableId: "t", rows: records } }],
      });
      await page.evaluate(`location.hash = "#/runs/${waitRun}"`);
      await page.locator('.dag-node[data-step="w"][data-status="waiting_confirmation"]').waitFor();
      await expect
        .poll(() => page.locator('details.step[data-step="w"] > summary').textContent(), POLL)
        .toMatch(/waited \d+ s for a decision/);
      // cancel with a reason, recorded with the cancel
      await page.getByRole("button", { name: "Cancel run" }).click();
      const cancel = page.getByRole("dialog");
      await cancel.getByLabel("Reason (recorded with the cancel)").fill("superseded by the 2.1 plan");
      await axe(page, "the cancel dialog");
      await cancel.getByRole("button", { name: "Cancel the run" }).click();
      await page.getByTestId("run-status").getByText("cancelled").waitFor();
      const ev = (await as("olga", "GET", `/api/tool-chains/runs/${waitRun}/events`)).body.events as {
        type: string;
        data: Record<string, unknown>;
      }[];
      expect(ev.find((e) => e.type === "run_cancel_requested")?.data).toMatchObject({
        reason: "superseded by the 2.1 plan",
        by: { kind: "user", id: "olga" },
        via: "console",
      });
      // toasts go away
      await page.getByTestId("toast").waitFor({ state: "hidden", timeout: 20_000 });
      expect(await cspViolations(page)).toEqual([]);
      await page.close();
    });

    it("opt-in browser notifications: a new decision while the tab is hidden notifies once", async () => {
      const page = await browser.page({ width: 1280, height: 860 });
      // a stand-in for the browser's notifications and visibility (evaluated before the page's scripts)
      await page.addInitScript(`
        window.__notes = [];
        Object.defineProperty(document, "hidden", { configurable: true, get: () => window.__hidden === true });
        window.Notification = class {
          static permission = "default";
          static requestPermission() { window.Notification.permission = "granted"; return Promise.resolve("granted"); }
          constructor(title, o) { window.__notes.push({ title, body: o && o.body }); }
        };
      `);
      const first = await start("olga", {
        steps: [{ stepId: "n1", skillName: "demo.rows.write", arguments: { tableId: "t", rows: records } }],
      });
      await page.goto(`${api.url}/console`);
      await page.getByLabel("API key or sign-in token").fill(keys.ana!);
      await page.getByRole("button", { name: "Sign in" }).click();
      const toggle = page.getByTestId("notify-toggle");
      await toggle.click();
      await expect.poll(() => toggle.getAttribute("aria-pressed"), POLL).toBe("true");
      // the badge counts what waits for Ana: the first poll has seen the first run
      await expect
        .poll(
          async () => Number((await page.getByTestId("pending-count").textContent())?.match(/^\d+/)?.[0] ?? 0),
          POLL,
        )
        .toBeGreaterThanOrEqual(1);
      await page.evaluate("window.__hidden = true");
      const second = await start("olga", {
        steps: [{ stepId: "n2", skillName: "demo.rows.write", arguments: { tableId: "t", rows: records } }],
      });
      await expect.poll(() => page.evaluate("window.__notes.length"), { timeout: 40_000, interval: 200 }).toBe(1);
      const [note] = (await page.evaluate("window.__notes")) as { title: string; body: string }[];
      expect(note!.title).toBe("A decision waits for you");
      expect(note!.body).toContain(second);
      expect(note!.body).not.toContain(first);
      for (const id of [first, second])
        await as("olga", "POST", `/api/tool-chains/runs/${id}/cancel`, { reason: "test done" });
      await page.close();
    });

    it("reported no console errors, page errors or CSP violations", () => {
      expect(browser.problems).toEqual([]);
    });
  },
);
