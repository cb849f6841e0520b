/**
 * The decision dialog of the QTable records write in Chromium (Debian's, driven by playwright-core)
 * against the real server on Postgres: the preview's timeline is drawn as a small Gantt chart (one
 * bar per task in half days, critical tasks marked, weekends and holidays shaded), under the
 * console's CSP (no inline styles: geometry in SVG attributes, colours in the stylesheet).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TableListResponseSchema } from "../src/api/schemas.js";
import { PgTableStore } from "../skills/qtable/pg-store.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, newKey, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { BROWSER_SKIP, cspViolations, launchBrowser, type Browser } from "./helpers/browser.js";
import { approvalPlan } from "./helpers/qtable.js";

if (BROWSER_SKIP) console.warn(`test/console-plan-gantt.test.ts: ${BROWSER_SKIP}`);
describe.skipIf(BROWSER_SKIP !== undefined)(
  `the planned timeline in the decision dialog (${postgresBackend.name})`,
  { timeout: 180_000 },
  () => {
    let api: ApiUnderTest;
    let closeRuntime: () => Promise<void>;
    let browser: Browser;
    let key: string;

    beforeAll(async () => {
      const o = await postgresBackend.open();
      closeRuntime = o.close;
      api = await serveApi(o.runtime, o.db, { tables: new PgTableStore(o.db!) });
      key = await newKey(api.access, "ws-plan-gantt");
      browser = await launchBrowser();
    }, 180_000);
    afterAll(async () => {
      await browser?.close();
      await api?.close();
      await closeRuntime?.();
    });

    it("draws the Gantt the write will put in the table: bars in half days, critical tasks, days off", async () => {
      const [tasks] = TableListResponseSchema.parse((await call(api.url, "GET", "/api/tables", { key })).body).tables;
      const started = await call(api.url, "POST", "/api/tool-chains/run", {
        key,
        body: {
          plan: approvalPlan(),
          context: {
            goal: "Plan an approval system with e-mail notifications and an audit log",
            table: { id: tasks!.id },
            startDate: "2026-12-21",
            holidays: [],
          },
        },
      });
      expect(started.body.status).toBe("waiting_confirmation");
      const items = started.body.pendingConfirmations[0].preview.timeline.items as {
        key: string;
        critical: boolean;
      }[];

      const page = await browser.page({ width: 1280, height: 900 });
      await page.goto(`${api.url}/console`);
      await page.getByLabel("API key or sign-in token").fill(key);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("navigation", { name: "Main" }).waitFor();
      await page.evaluate(`location.hash = ${JSON.stringify(`#/runs/${started.body.runId}`)}`);
      await page.locator(".pending").getByRole("button", { name: "Review…" }).click();
      const chart = page.getByRole("dialog").getByTestId("plan-gantt");
      await chart.waitFor();
      expect(await chart.getByRole("img").getAttribute("aria-label")).toBe(
        `Planned timeline: ${items.length} tasks from 2026-12-21 to 2027-01-18`,
      );
      // one bar per task, the critical ones marked (docs has slack)
      const bars = chart.locator("rect.pg-bar");
      expect(await bars.count()).toBe(items.length);
      expect(await chart.locator("rect.pg-bar.pg-critical").count()).toBe(items.filter((i) => i.critical).length);
      expect(await chart.locator('rect.pg-bar[data-key="docs"]').getAttribute("class")).toBe("pg-bar");
      // weekends, Christmas Day and New Year's Day are shaded: 8 weekend days and 2 holidays in 29 days
      const off = await chart.locator("rect.pg-off").evaluateAll((rs) => rs.map((r) => r.getAttribute("data-day")));
      expect(off).toHaveLength(10);
      expect(off).toEqual(expect.arrayContaining(["2026-12-25", "2026-12-26", "2027-01-01", "2027-01-17"]));
      // half days: test ends at midday on the 15th (3.5 calendar columns), rollout starts then
      const dayW = Number(await chart.locator("rect.pg-off").first().getAttribute("width"));
      const box = async (k: string) => {
        const r = chart.locator(`rect.pg-bar[data-key="${k}"]`);
        return { x: Number(await r.getAttribute("x")), w: Number(await r.getAttribute("width")) };
      };
      const test = await box("test");
      const rollout = await box("rollout");
      expect(test.w / dayW).toBeCloseTo(3.5, 1);
      expect(rollout.x).toBeCloseTo(test.x + test.w, 0);
      expect(await chart.locator('rect.pg-bar[data-key="test"] title').textContent()).toBe(
        "Test the approval system (test): 2027-01-12 to 2027-01-15, 3.5 working days, slack 0, critical",
      );
      expect(await cspViolations(page)).toEqual([]);
      expect(browser.problems).toEqual([]);
    });
  },
);
