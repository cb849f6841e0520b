/**
 * The inbox live in Chromium (Debian's, driven by playwright-core) against the real server: with
 * six runs waiting, a decision made through REST on the fifth (which the old per-run streams, held
 * for the three oldest only, left to the 4 s poll) removes its row and tells its open dialog who
 * decided within 1.5 s, over one workspace stream and no per-run one.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresBackend } from "./helpers/backends.js";
import { call, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { BROWSER_SKIP, launchBrowser, type Browser } from "./helpers/browser.js";
import { approvalSkill, EffectLedger } from "./helpers/skills.js";
import type { Database } from "../src/store/db.js";

const WS = "ws-inbox-live";

if (BROWSER_SKIP) console.warn(`test/console-inbox-live.test.ts: ${BROWSER_SKIP}`);
describe.skipIf(BROWSER_SKIP !== undefined)(
  `the inbox follows every row live (${postgresBackend.name})`,
  { timeout: 120_000 },
  () => {
    let api: ApiUnderTest;
    let closeRuntime: () => Promise<void>;
    let db: Database;
    let browser: Browser;
    const keys: Record<string, string> = {};

    beforeAll(async () => {
      const o = await postgresBackend.open({ skills: [approvalSkill(new EffectLedger())] });
      closeRuntime = o.close;
      db = o.db!;
      api = await serveApi(o.runtime, o.db);
      await api.access.ensureWorkspace(WS);
      keys.ana = (await api.access.createKey(WS, { user: { id: "ana", name: "Ana Lopez", roles: ["approver"] } })).key;
      keys.bob = (await api.access.createKey(WS, { user: { id: "bob", name: "Bob Stone", roles: ["approver"] } })).key;
      keys.olga = (await api.access.createKey(WS, { user: { id: "olga", name: "Olga Ops", roles: ["operator"] } })).key;
      browser = await launchBrowser();
    }, 120_000);

    afterAll(async () => {
      await browser?.close();
      await api?.close();
      await closeRuntime?.();
    });

    it("a decision made elsewhere on the 5th of 6 waiting runs: its row leaves and its open dialog says who, within 1.5 s", async () => {
      const runs: string[] = [];
      for (let i = 1; i <= 6; i++) {
        const r = await call(api.url, "POST", "/api/tool-chains/run", {
          key: keys.olga,
          body: {
            plan: {
              goal: `Post ${i}`,
              steps: [{ stepId: "pub", skillName: "test.publish", arguments: { title: `t${i}` } }],
            },
          },
        });
        expect(r.body.status, r.text).toBe("waiting_confirmation");
        runs.push(r.body.runId);
        await new Promise((res) => setTimeout(res, 20)); // distinct wait times: the order is the creation order
      }
      const page = await browser.page({ width: 1280, height: 860 });
      const streams: string[] = [];
      page.on("request", (req) => {
        if ((req.headers().accept ?? "").includes("text/event-stream")) streams.push(new URL(req.url()).pathname);
      });
      await page.goto(`${api.url}/console`);
      await page.getByLabel("API key or sign-in token").fill(keys.ana!);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("navigation", { name: "Main" }).waitFor();
      await page.evaluate(`location.hash = "#/decisions"`);
      const row = (runId: string) => page.locator(`[data-testid=decisions-table] tr[data-run="${runId}"]`);
      for (const id of runs) await row(id).waitFor();
      expect(
        await page
          .locator("[data-testid=decisions-table] tr[data-run]")
          .evaluateAll((trs) => trs.map((tr) => tr.getAttribute("data-run"))),
      ).toEqual(runs);
      // the stream is open before the decision is made
      await expect.poll(() => streams.includes("/api/tool-chains/decisions/events"), { timeout: 10_000 }).toBe(true);

      await row(runs[4]!).getByRole("button", { name: "Review…" }).click();
      const dialog = page.getByRole("dialog");
      await dialog.getByTestId("effect-summary").waitFor();
      // the list was just loaded: the 4 s poll is as far away as it gets. The REST call answers once
      // the run has applied the rejection (under load, a good part of a second): the 1.5 s count
      // from the moment the decision was stored (its row's created_at, the same machine's clock)
      const posted = call(api.url, "POST", `/api/tool-chains/runs/${runs[4]}/confirm`, {
        key: keys.bob,
        body: { stepId: "pub", decision: "reject", comment: "not now" },
      });
      await dialog
        .getByTestId("decided-elsewhere")
        .getByText("Rejected by Bob Stone via rest just now.", { exact: false })
        .waitFor({ timeout: 10_000 });
      await expect.poll(() => row(runs[4]!).count(), { timeout: 10_000, interval: 50 }).toBe(0);
      const seen = Date.now();
      const r = await posted;
      expect(r.status, r.text).toBe(200);
      const stored = await db.pool.query(
        `SELECT (extract(epoch FROM created_at) * 1000)::float8 AS t FROM "${db.schema}".tool_chain_decisions WHERE run_id = $1`,
        [runs[4]],
      );
      expect(seen - Number(stored.rows[0].t)).toBeLessThan(1_500);
      expect(await dialog.getByRole("button", { name: "Approve" }).isDisabled()).toBe(true);
      // the others stay, and no run's own stream was opened: one connection for every row
      for (const id of [...runs.slice(0, 4), runs[5]!]) expect(await row(id).count()).toBe(1);
      expect(new Set(streams)).toEqual(new Set(["/api/tool-chains/decisions/events"]));
      await page.close();
      expect(browser.problems).toEqual([]);
    });
  },
);
