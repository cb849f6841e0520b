/**
 * The workspace's runs, newest first, with a status filter. Live: the first page is fetched again
 * every few seconds while the tab is visible (the API has no workspace-wide stream); step
 * progress comes from each run's view, fetched again only when the run's updatedAt moved.
 */
import { TERMINAL_RUN, RunStatus } from "../../../src/kernel/status.js";
import type { Ctx, View } from "../context.js";
import { badge, h, replace, uid } from "../dom.js";
import { age } from "../model/format.js";
import type { RunSummary, RunView } from "../model/types.js";

const POLL_MS = 3_000;
const PAGE = 25;

const FILTERS: { value: string; label: string; statuses: string[] }[] = [
  { value: "", label: "All", statuses: [] },
  {
    value: "active",
    label: "Active (queued, running, waiting)",
    statuses: ["queued", "planning", "running", "waiting_confirmation"],
  },
  ...Object.values(RunStatus).map((s) => ({ value: s, label: s.replace(/_/g, " "), statuses: [s] })),
];

export interface ProgressCache {
  get(ctx: Ctx, r: Pick<RunSummary, "runId" | "updatedAt">): Promise<RunView | undefined>;
  /** Fetch this run's view again next time (a decision changed what the caller may decide). */
  forget(runId: string): void;
}

/** Run views by runId, fetched again only when the run's updatedAt changed. */
export function progressCache(): ProgressCache {
  const views = new Map<string, { updatedAt: string; view: Promise<RunView | undefined> }>();
  return {
    forget(runId) {
      views.delete(runId);
    },
    get(ctx, r) {
      const hit = views.get(r.runId);
      if (hit && hit.updatedAt === r.updatedAt) return hit.view;
      const view = ctx.api.getRun(r.runId).catch(() => undefined);
      views.set(r.runId, { updatedAt: r.updatedAt, view });
      if (views.size > 2_000) views.delete(views.keys().next().value!);
      return view;
    },
  };
}

function progressText(v: RunView | undefined, total: number): string {
  if (!v) return `${total} ${total === 1 ? "step" : "steps"}`;
  const c = (s: string) => v.steps.filter((x) => x.status === s).length;
  const done = c("completed");
  const parts = [`${done}/${v.steps.length} done`];
  for (const s of [
    "running",
    "waiting_confirmation",
    "failed",
    "rolled_back",
    "rollback_failed",
    "skipped",
    "cancelled",
  ]) {
    const n = c(s);
    if (n) parts.push(`${n} ${s.replace(/_/g, " ")}`);
  }
  return parts.join(", ");
}

export const runsView: View = (el, ctx) => {
  const params = new URLSearchParams(location.hash.split("?")[1] ?? "");
  let filter = FILTERS.find((f) => f.value === params.get("status")) ?? FILTERS[0]!;
  const cache = progressCache();
  const selectId = uid("status-filter");
  const select = h(
    "select",
    { id: selectId, "data-testid": "status-filter" },
    FILTERS.map((f) => h("option", { value: f.value, ...(f === filter ? { selected: true } : {}) }, f.label)),
  );
  const body = h("tbody");
  const more = h("button", { type: "button", class: "btn", hidden: true }, "Load more");
  const info = h("p", { class: "muted", "aria-live": "polite" });
  let runs: RunSummary[] = [];
  let cursor: string | null = null;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let pages = 1;

  const row = (r: RunSummary) => {
    const progress = h(
      "td",
      { class: "progress", "data-label": "Steps" },
      `${r.stepCount} ${r.stepCount === 1 ? "step" : "steps"}`,
    );
    if (!TERMINAL_RUN.has(r.status) || r.status === "rollback_failed" || r.stepCount <= 200) {
      void cache.get(ctx, r).then((v) => progress.replaceChildren(progressText(v, r.stepCount)));
    }
    const created = Date.parse(r.createdAt);
    return h(
      "tr",
      { "data-run": r.runId, "data-status": r.status },
      h(
        "td",
        { "data-label": "Run" },
        h("a", { href: `#/runs/${encodeURIComponent(r.runId)}` }, r.goal || r.planId || r.runId),
        r.goal || r.planId ? h("div", { class: "muted small mono" }, r.runId) : null,
      ),
      h("td", { "data-label": "Status" }, badge(r.status)),
      progress,
      h(
        "td",
        { title: new Date(created).toLocaleString(), "data-label": "Created" },
        h("time", { datetime: r.createdAt }, `${age(Date.now() - created)} ago`),
      ),
      h(
        "td",
        { title: new Date(Date.parse(r.updatedAt)).toLocaleString(), "data-label": "Updated" },
        `${age(Date.now() - Date.parse(r.updatedAt))} ago`,
      ),
    );
  };
  const render = () => {
    // keep keyboard focus on the same run across refreshes
    const focused = (document.activeElement as HTMLElement | null)?.closest?.("tr[data-run]")?.getAttribute("data-run");
    replace(
      body,
      runs.length
        ? runs.map(row)
        : h(
            "tr",
            {},
            h("td", { colspan: 5, class: "muted" }, filter.value ? "No runs with this status." : "No runs yet."),
          ),
    );
    more.hidden = !cursor;
    if (focused) body.querySelector<HTMLAnchorElement>(`tr[data-run="${CSS.escape(focused)}"] a`)?.focus();
  };
  // poll while the tab is visible; a hidden tab only checks back
  const tick = () => {
    if (stopped) return;
    if (document.hidden) timer = setTimeout(tick, POLL_MS);
    else void load();
  };
  const load = async () => {
    clearTimeout(timer);
    try {
      // refresh every page shown so far, so live updates do not drop loaded rows
      const all: RunSummary[] = [];
      let c: string | null = null;
      for (let i = 0; i < pages; i++) {
        const r: { runs: RunSummary[]; nextCursor: string | null } = await ctx.api.listRuns({
          status: filter.statuses,
          limit: PAGE,
          cursor: c,
        });
        all.push(...r.runs);
        c = r.nextCursor;
        if (!c) break;
      }
      if (stopped) return;
      runs = all;
      cursor = c;
      info.textContent = `Updated ${new Date().toLocaleTimeString()} · refreshes every ${POLL_MS / 1000} s`;
      render();
    } catch (e) {
      if (!stopped) info.textContent = `Could not load runs: ${(e as Error).message}`;
    }
    if (!stopped) timer = setTimeout(tick, POLL_MS);
  };
  select.addEventListener("change", () => {
    filter = FILTERS.find((f) => f.value === select.value) ?? FILTERS[0]!;
    pages = 1;
    history.replaceState(null, "", filter.value ? `#/runs?status=${filter.value}` : "#/runs");
    void load();
  });
  more.addEventListener("click", () => {
    pages++;
    void load();
  });

  replace(
    el,
    h(
      "section",
      { class: "page" },
      h(
        "div",
        { class: "page-head" },
        h("h1", {}, "Runs"),
        h("div", { class: "field inline" }, h("label", { for: selectId }, "Status"), select),
      ),
      h(
        "div",
        { class: "table-wrap cards" },
        h(
          "table",
          { class: "runs", "data-testid": "runs-table" },
          h("caption", { class: "sr-only" }, "Runs of this workspace, newest first"),
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              ["Run", "Status", "Steps", "Created", "Updated"].map((c) => h("th", { scope: "col" }, c)),
            ),
          ),
          body,
        ),
      ),
      h("div", { class: "row" }, more, info),
    ),
  );
  void load();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
};
