/**
 * The inbox: every pending decision across the workspace's runs (runs that can hold one: waiting,
 * running with a step waiting while other branches go on, rollback_failed in strict mode), longest
 * waiting first, measured from when each step began waiting (its wait event). Signed in as a person,
 * it shows what *I* may decide by default. Live: every row follows the workspace's decision stream
 * (one connection however many runs wait): a decision made elsewhere removes its row at once and
 * tells an open dialog who decided; a new wait reloads the list. The slow poll is a safety net.
 */
import type { View } from "../context.js";
import { badge, h, replace, uid } from "../dom.js";
import {
  actorName,
  collectPending,
  decidedBy,
  decidedFromStep,
  KIND_LABEL,
  kindOf,
  type PendingItem,
} from "../model/decisions.js";
import { effectSummary } from "../model/effect.js";
import { age, compact } from "../model/format.js";
import { recordTables } from "../model/records.js";
import { waitingSince } from "../model/timeline.js";
import type { ApprovalState, RunEvent, RunSummary, RunView } from "../model/types.js";
import { followDecisions } from "../sse.js";
import { openDecisionDialog, type DecisionDialog } from "./decision-dialog.js";
import { askCancel } from "./cancel-dialog.js";
import { progressCache } from "./runs.js";

const POLL_MS = 4_000;
const MAX_RUNS = 500;
const HOLDERS = ["waiting_confirmation", "running", "rollback_failed"];

/** What deciding would do, in the words the dialog's summary starts with. */
function previewSummary(p: PendingItem["pending"]): string {
  const kind = kindOf(p);
  if (kind === "compensation") return compact((p.preview as { error?: unknown } | null)?.error ?? p.preview, 120);
  if (kind === "in_doubt") return `in doubt: ${compact(p.arguments, 100)}`;
  const e = effectSummary(p.skillName, undefined, p.preview, p.arguments);
  if (e.count !== null || e.target || e.channel) return e.sentence;
  const t = recordTables(p.preview);
  if (t.length) return t.map((x) => `${x.rows.length} ${x.path || "records"}`).join(", ");
  return compact(p.preview ?? p.arguments, 120);
}

const approvalOf = (p: PendingItem["pending"]) => (p as { approval?: ApprovalState }).approval;
const keyOf = (runId: string, stepId: string) => `${runId}/${stepId}`;

export const decisionsView: View = (el, ctx) => {
  const cache = progressCache();
  const body = h("tbody");
  const info = h("p", { class: "muted", "aria-live": "polite" });
  const identified = ctx.me?.actor.kind === "user";
  const mineId = uid("mine");
  const mine = h("input", { type: "checkbox", id: mineId, "data-testid": "mine" });
  mine.checked = identified;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let busy = false;
  let again = false;
  /** Per run: events read so far and when each of its steps began waiting. */
  const waits = new Map<string, { after: number; since: Map<string, number> }>();
  /** Runs whose wait times the decision stream keeps current (cleared whenever it reconnects). */
  const current = new Set<string>();
  let streamLive = false;
  const gone = new Set<string>();
  let open: { key: string; dialog: DecisionDialog } | undefined;
  let items: PendingItem[] = [];

  const mayDecide = (it: PendingItem) => (ctx.me?.may.decide ?? true) && approvalOf(it.pending)?.youMayDecide !== false;

  const removeRow = (key: string) => {
    gone.add(key);
    for (const tr of body.querySelectorAll<HTMLElement>("tr[data-run]"))
      if (keyOf(tr.dataset.run!, tr.dataset.step!) === key) {
        const next = (tr.nextElementSibling ?? tr.previousElementSibling) as HTMLElement | null;
        const hadFocus = tr.contains(document.activeElement);
        tr.remove();
        if (hadFocus) (next?.querySelector("button") ?? el.querySelector<HTMLElement>("h1"))?.focus();
      }
    items = items.filter((it) => keyOf(it.runId, it.pending.stepId) !== key);
    renderInfo();
  };

  const onLiveEvent = (e: RunEvent) => {
    const runId = e.runId;
    const w = waits.get(runId);
    if (w) {
      w.after = Math.max(w.after, e.seq);
      const since = waitingSince([e]);
      for (const [s, at] of since) w.since.set(s, at);
      if (e.stepId && (e.type === "step_confirmed" || e.type === "step_started")) w.since.delete(e.stepId);
    }
    const decided = decidedBy(e);
    if (decided) {
      const keys =
        e.type === "run_cancel_requested"
          ? items.filter((it) => it.runId === runId).map((it) => keyOf(runId, it.pending.stepId))
          : e.stepId
            ? [keyOf(runId, e.stepId)]
            : [];
      for (const k of keys) {
        if (open?.key === k) open.dialog.decidedElsewhere(decided);
        removeRow(k);
      }
    }
    if (decided || e.type === "approval_given" || e.type.endsWith("waiting_confirmation")) {
      cache.forget(runId);
      schedule(150);
    }
  };

  const review = async (it: PendingItem, button: HTMLButtonElement) => {
    const key = keyOf(it.runId, it.pending.stepId);
    const dialog = openDecisionDialog(ctx, { runId: it.runId, pending: it.pending });
    open = { key, dialog };
    if (gone.has(key)) dialog.decidedElsewhere({ label: "Decided" });
    const sent = await dialog.closed;
    open = undefined;
    if (sent) {
      removeRow(key);
      cache.forget(it.runId);
      void load();
    } else if (button.isConnected) button.focus();
    else el.querySelector<HTMLElement>("h1")?.focus();
  };

  const row = (it: PendingItem) => {
    const kind = kindOf(it.pending);
    const a = approvalOf(it.pending);
    const btn = h("button", { type: "button", class: "btn primary", "data-testid": "review" }, "Review…");
    btn.addEventListener("click", () => void review(it, btn));
    const approvals = a ? a.given.filter((g) => g.decision === "approve") : [];
    return h(
      "tr",
      { "data-run": it.runId, "data-step": it.pending.stepId, "data-kind": kind },
      h(
        "td",
        { "data-label": "Run" },
        h("a", { href: `#/runs/${encodeURIComponent(it.runId)}` }, it.goal || it.runId),
        it.goal ? h("div", { class: "muted small mono" }, it.runId) : null,
      ),
      h(
        "td",
        { "data-label": "Step" },
        h("code", {}, it.pending.stepId),
        h("div", { class: "muted small" }, it.pending.skillName),
      ),
      h(
        "td",
        { "data-label": "Kind" },
        h("span", { class: `kind kind-${kind}` }, KIND_LABEL[kind]),
        " ",
        badge(it.runStatus),
        a
          ? h(
              "div",
              { class: "small", "data-testid": "quorum" },
              `${approvals.length} of ${a.required} approved`,
              approvals.length ? ` (${approvals.map((g) => (g.by ? actorName(g.by) : "?")).join(", ")})` : "",
              a.youMayDecide ? "" : " · not yours to decide",
            )
          : null,
      ),
      h("td", { class: "preview-cell", "data-label": "Preview" }, previewSummary(it.pending)),
      h(
        "td",
        {
          "data-label": "Waiting",
          "data-testid": "waiting",
          "data-since": new Date(it.since).toISOString(),
          title: new Date(it.since).toLocaleString(),
        },
        age(Date.now() - it.since),
      ),
      h(
        "td",
        { class: "actions", "data-label": "Actions" },
        btn,
        ctx.me?.may.cancel === false
          ? null
          : h(
              "button",
              {
                type: "button",
                class: "btn danger subtle",
                onclick: async () => {
                  if (await askCancel(ctx, it.runId)) void load();
                },
              },
              "Cancel run",
            ),
      ),
    );
  };

  const renderInfo = () => {
    info.textContent = `${items.length} pending${mine.checked ? " for you" : ""} · updated ${new Date().toLocaleTimeString()}`;
  };

  const schedule = (ms: number) => {
    clearTimeout(timer);
    if (!stopped) timer = setTimeout(tick, ms);
  };
  // poll while the tab is visible (a dialog being open does not stop it: rows stay correct under it)
  function tick(): void {
    if (stopped) return;
    if (document.hidden) schedule(POLL_MS);
    else void load();
  }

  async function sinceOf(runIds: string[]): Promise<void> {
    await Promise.all(
      runIds.map(async (id) => {
        if (current.has(id)) return; // the decision stream keeps it current
        const w = waits.get(id) ?? { after: 0, since: new Map<string, number>() };
        waits.set(id, w);
        const live = streamLive;
        const events = await ctx.api.events(id, w.after).catch(() => [] as RunEvent[]);
        for (const e of events) {
          w.after = Math.max(w.after, e.seq);
          for (const [s, at] of waitingSince([e])) w.since.set(s, at);
          if (e.stepId && (e.type === "step_confirmed" || e.type === "step_started")) w.since.delete(e.stepId);
        }
        if (live && streamLive) current.add(id);
      }),
    );
  }

  async function load(): Promise<void> {
    clearTimeout(timer);
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    try {
      const runs: RunSummary[] = [];
      let cursor: string | null = null;
      do {
        const r: { runs: RunSummary[]; nextCursor: string | null } = await ctx.api.listRuns({
          status: HOLDERS,
          limit: 100,
          cursor,
        });
        runs.push(...r.runs);
        cursor = r.nextCursor;
      } while (cursor && runs.length < MAX_RUNS);
      const views: RunView[] = [];
      // a few at a time: the rate limit is per key
      for (let i = 0; i < runs.length; i += 6) {
        const got = await Promise.all(runs.slice(i, i + 6).map((r) => cache.get(ctx, r)));
        for (const v of got) if (v?.pendingConfirmations.length) views.push(v);
      }
      await sinceOf(views.map((v) => v.runId));
      if (stopped) return;
      const all = collectPending(views, (runId, stepId) => waits.get(runId)?.since.get(stepId));
      items = mine.checked ? all.filter(mayDecide) : all;
      gone.clear();
      // an open dialog whose step is no longer waiting was decided elsewhere
      if (open && !items.some((it) => keyOf(it.runId, it.pending.stepId) === open!.key)) {
        const [runId, stepId] = [
          open.key.slice(0, open.key.lastIndexOf("/")),
          open.key.slice(open.key.lastIndexOf("/") + 1),
        ];
        const v = views.find((x) => x.runId === runId);
        if (!v?.pendingConfirmations.some((p) => p.stepId === stepId)) {
          const d = open.dialog;
          void ctx.api
            .getRun(runId)
            .then((rv) => d.decidedElsewhere(decidedFromStep(rv.steps.find((s) => s.stepId === stepId))))
            .catch(() => d.decidedElsewhere({ label: "Decided" }));
        }
      }
      const focused = (document.activeElement as HTMLElement | null)?.closest?.("tr[data-run]") as HTMLElement | null;
      const key = focused ? keyOf(focused.dataset.run!, focused.dataset.step!) : null;
      replace(
        body,
        items.length
          ? items.map(row)
          : h(
              "tr",
              {},
              h(
                "td",
                { colspan: 6, class: "muted" },
                mine.checked ? "Nothing waits for your decision." : "Nothing waits for a decision.",
              ),
            ),
      );
      if (key)
        for (const tr of body.querySelectorAll<HTMLElement>("tr[data-run]"))
          if (keyOf(tr.dataset.run!, tr.dataset.step!) === key) tr.querySelector("button")?.focus();
      renderInfo();
      if (runs.length >= MAX_RUNS) info.textContent += ` · only the newest ${MAX_RUNS} runs are searched`;
    } catch (e) {
      if (!stopped) info.textContent = `Could not load decisions: ${(e as Error).message}`;
    } finally {
      busy = false;
    }
    if (again) {
      again = false;
      void load();
    } else schedule(POLL_MS);
  }
  mine.addEventListener("change", () => void load());

  replace(
    el,
    h(
      "section",
      { class: "page" },
      h(
        "div",
        { class: "page-head" },
        h("h1", { tabindex: -1 }, "Decisions"),
        h("button", { type: "button", class: "btn", onclick: () => void load() }, "Refresh"),
      ),
      h(
        "p",
        { class: "muted" },
        "Confirmations, steps in doubt and failed strict compensations across this workspace's runs, longest waiting first.",
      ),
      h(
        "div",
        { class: "field inline" },
        mine,
        h(
          "label",
          { for: mineId },
          identified ? `Only what I (${actorName(ctx.me!.actor)}) may decide` : "Only what this key may decide",
        ),
      ),
      h(
        "div",
        { class: "table-wrap cards" },
        h(
          "table",
          { class: "decisions", "data-testid": "decisions-table" },
          h("caption", { class: "sr-only" }, "Pending decisions"),
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              ["Run", "Step", "Kind", "Preview", "Waiting", "Actions"].map((c) => h("th", { scope: "col" }, c)),
            ),
          ),
          body,
        ),
      ),
      info,
    ),
  );
  void load();
  const stream = followDecisions(ctx.api, {
    event: onLiveEvent,
    state(s) {
      current.clear();
      streamLive = s === "live";
      // what happened while it was away is not replayed: read the list again
      if (streamLive) void load();
    },
  });
  return () => {
    stopped = true;
    clearTimeout(timer);
    stream.close();
  };
};
