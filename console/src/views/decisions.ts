/**
 * Every pending decision across the workspace's runs: runs that can hold one (waiting, running
 * with a step waiting while other branches go on, rollback_failed in strict mode) are listed,
 * and their views (fetched again only when a run changed) carry the pending decisions.
 */
import type { View } from "../context.js";
import { badge, h, replace } from "../dom.js";
import { collectPending, KIND_LABEL, kindOf, type PendingItem } from "../model/decisions.js";
import { age, compact } from "../model/format.js";
import { recordTables } from "../model/records.js";
import type { RunSummary, RunView } from "../model/types.js";
import { openDecisionDialog } from "./decision-dialog.js";
import { progressCache } from "./runs.js";

const POLL_MS = 4_000;
const MAX_RUNS = 500;
const HOLDERS = ["waiting_confirmation", "running", "rollback_failed"];

function previewSummary(p: PendingItem["pending"]): string {
  if (kindOf(p) === "compensation") return compact((p.preview as { error?: unknown } | null)?.error ?? p.preview, 120);
  const t = recordTables(p.preview);
  if (t.length) return t.map((x) => `${x.rows.length} ${x.path || "records"}`).join(", ");
  return compact(p.preview ?? p.arguments, 120);
}

export const decisionsView: View = (el, ctx) => {
  const cache = progressCache();
  const body = h("tbody");
  const info = h("p", { class: "muted", "aria-live": "polite" });
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let busy = false;

  const cancel = async (runId: string) => {
    if (!confirm(`Cancel run ${runId}? Running steps are aborted and completed work is compensated.`)) return;
    try {
      await ctx.api.cancel(runId, "cancelled from the console");
      ctx.notify(`Cancelling run ${runId}.`);
    } catch (e) {
      ctx.notify(`Could not cancel: ${(e as Error).message}`, "error");
    }
    void load();
  };
  const row = (it: PendingItem) => {
    const kind = kindOf(it.pending);
    const review = h("button", { type: "button", class: "btn primary", "data-testid": "review" }, "Review…");
    review.addEventListener("click", async () => {
      const sent = await openDecisionDialog(ctx, { runId: it.runId, pending: it.pending });
      if (sent) void load();
      else review.focus();
    });
    return h("tr", { "data-run": it.runId, "data-step": it.pending.stepId, "data-kind": kind },
      h("td", {}, h("a", { href: `#/runs/${encodeURIComponent(it.runId)}` }, it.goal || it.runId), it.goal ? h("div", { class: "muted small mono" }, it.runId) : null),
      h("td", {}, h("code", {}, it.pending.stepId), h("div", { class: "muted small" }, it.pending.skillName)),
      h("td", {}, h("span", { class: `kind kind-${kind}` }, KIND_LABEL[kind]), " ", badge(it.runStatus)),
      h("td", { class: "preview-cell" }, previewSummary(it.pending)),
      h("td", {}, `${age(Date.now() - Date.parse(it.updatedAt))}`),
      h("td", { class: "actions" }, review, h("button", { type: "button", class: "btn danger subtle", onclick: () => void cancel(it.runId) }, "Cancel run")),
    );
  };

  // poll while the tab is visible and no dialog is open (rows would move under the approver)
  function tick(): void {
    if (stopped) return;
    if (document.hidden || document.querySelector("dialog[open]")) timer = setTimeout(tick, POLL_MS);
    else void load();
  }

  async function load(): Promise<void> {
    clearTimeout(timer);
    if (busy) return;
    busy = true;
    try {
      const runs: RunSummary[] = [];
      let cursor: string | null = null;
      do {
        const r: { runs: RunSummary[]; nextCursor: string | null } = await ctx.api.listRuns({ status: HOLDERS, limit: 100, cursor });
        runs.push(...r.runs);
        cursor = r.nextCursor;
      } while (cursor && runs.length < MAX_RUNS);
      const views: RunView[] = [];
      // a few at a time: the rate limit is per key
      for (let i = 0; i < runs.length; i += 6) {
        const got = await Promise.all(runs.slice(i, i + 6).map((r) => cache.get(ctx, r)));
        for (const v of got) if (v?.pendingConfirmations.length) views.push(v);
      }
      if (stopped) return;
      const items = collectPending(views);
      const focused = (document.activeElement as HTMLElement | null)?.closest?.("tr[data-run]");
      const key = focused ? `${focused.getAttribute("data-run")}/${focused.getAttribute("data-step")}` : null;
      replace(body, items.length ? items.map(row) : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "Nothing waits for a decision.")));
      if (key) for (const tr of body.querySelectorAll("tr[data-run]")) if (`${tr.getAttribute("data-run")}/${tr.getAttribute("data-step")}` === key) tr.querySelector("button")?.focus();
      info.textContent = `${items.length} pending · updated ${new Date().toLocaleTimeString()}${runs.length >= MAX_RUNS ? ` · only the newest ${MAX_RUNS} runs are searched` : ""}`;
    } catch (e) {
      if (!stopped) info.textContent = `Could not load decisions: ${(e as Error).message}`;
    } finally {
      busy = false;
    }
    if (!stopped) timer = setTimeout(tick, POLL_MS);
  }

  replace(el,
    h("section", { class: "page" },
      h("div", { class: "page-head" }, h("h1", {}, "Decisions"), h("button", { type: "button", class: "btn", onclick: () => void load() }, "Refresh")),
      h("p", { class: "muted" }, "Confirmations, steps in doubt and failed strict compensations across this workspace's runs, longest waiting first."),
      h("div", { class: "table-wrap" },
        h("table", { class: "decisions", "data-testid": "decisions-table" },
          h("caption", { class: "sr-only" }, "Pending decisions"),
          h("thead", {}, h("tr", {}, ["Run", "Step", "Kind", "Preview", "Waiting", "Actions"].map((c) => h("th", { scope: "col" }, c)))),
          body,
        ),
      ),
      info,
    ),
  );
  void load();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
};
