/**
 * One run: header and actions, pending decisions, the DAG, the timeline, each step's resolved
 * input/output/error and rollback status, and the event log. Live: the stored events (JSON),
 * then SSE from the last one (Last-Event-ID); every event moves the DAG at once, and the view
 * (inputs, outputs, rollback) is fetched again shortly after.
 */
import { REDRIVABLE_RUN, TERMINAL_RUN, type StepStatus } from "../../../src/kernel/status.js";
import type { Ctx, View } from "../context.js";
import { badge, h, replace } from "../dom.js";
import { actorName, decidedBy, KIND_LABEL, kindOf } from "../model/decisions.js";
import { age, compact, duration, humanStatus } from "../model/format.js";
import { applyLiveEvent } from "../model/live.js";
import { activeMs, buildTimeline, type Timeline } from "../model/timeline.js";
import type { ApprovalState, ErrorInfo, RunEvent, RunView, StepView } from "../model/types.js";
import { followRun, type FollowState, type Follower } from "../sse.js";
import { dagView, type DagView } from "./dag.js";
import { askCancel } from "./cancel-dialog.js";
import { askRedrive } from "./redrive-dialog.js";
import { openDecisionDialog, type DecisionDialog } from "./decision-dialog.js";
import { timelineView } from "./timeline.js";
import { jsonBlock, valueView } from "./values.js";

const LOG_MAX = 2_000;
const LEGEND = [
  "pending",
  "running",
  "retrying",
  "waiting_confirmation",
  "completed",
  "failed",
  "skipped",
  "cancelled",
  "rolled_back",
  "rollback_failed",
];

/** "Approved by Ana (console), 3 min ago: “comment”" */
function decisionText(d: NonNullable<StepView["decision"]>): string {
  const what = { approve: "Approved", reject: "Rejected", mark_done: "Marked done", skip: "Skipped" }[d.decision];
  const quorum = d.approvals?.length
    ? ` (approvals: ${d.approvals.map((a) => actorName(a.by) + (a.via ? ` via ${a.via}` : "")).join(", ")})`
    : "";
  return `${what}${d.by ? ` by ${actorName(d.by)}` : ""}${d.via ? ` via ${d.via}` : ""}${d.at ? `, ${age(Date.now() - Date.parse(d.at))} ago` : ""}${quorum}${d.comment ? `: “${d.comment}”` : ""}`;
}

/**
 * A step's error as what it is: a person's rejection is an outcome, not a crash; an error that a
 * later attempt recovered from is history, not a failure.
 */
function errorView(s: StepView, e: ErrorInfo) {
  if (s.status === "completed" || s.status === "rolled_back")
    return h(
      "details",
      { class: "raw", "data-testid": "recovered-error" },
      h(
        "summary",
        {},
        `An earlier attempt failed (${e.code}); the step ${s.status === "completed" ? "completed" : "was rolled back"}`,
      ),
      h("p", { class: "small" }, e.message),
    );
  if (e.code === "REJECTED")
    return [
      h("h3", {}, "Rejected"),
      h("div", { class: "note-box", "data-testid": "rejected" }, s.decision ? decisionText(s.decision) : e.message),
    ];
  return [
    h("h3", {}, "Error"),
    h("div", { class: "error-box" }, h("strong", {}, e.code), ": ", e.message),
    e.details !== undefined ? jsonBlock(e.details, "Error details") : null,
  ];
}

export function runView(runId: string): View {
  return (el, ctx) => mountRun(el, ctx, runId);
}

function mountRun(el: HTMLElement, ctx: Ctx, runId: string): () => void {
  let view: RunView | undefined;
  const events: RunEvent[] = [];
  const seen = new Set<number>();
  const eventStatus = new Map<string, StepStatus>();
  let dag: DagView | undefined;
  let follower: Follower | undefined;
  let stopped = false;
  let refetch: ReturnType<typeof setTimeout> | undefined;
  let ticker: ReturnType<typeof setInterval> | undefined;
  let timeline: Timeline | undefined;
  /** The decision dialog open on this page, and the step it decides. */
  let open: { stepId: string; dialog: DecisionDialog } | undefined;

  const title = h("h1", { tabindex: -1 }, "Run");
  const statusSlot = h("span", { "aria-live": "polite", "data-testid": "run-status" });
  const meta = h("p", { class: "muted small" });
  const live = h("span", { class: "live-state", "aria-live": "polite" });
  const cancelBtn = h("button", { type: "button", class: "btn danger", hidden: true }, "Cancel run");
  const redriveBtn = h("button", { type: "button", class: "btn", hidden: true, "data-testid": "redrive" }, "Redrive…");
  const errorSlot = h("div");
  const pendingSlot = h("div");
  const dagSlot = h("div", { "data-testid": "dag" }, h("p", { class: "muted" }, "Loading…"));
  const timelineSlot = h("div", { "data-testid": "timeline" });
  const stepsSlot = h("div", { class: "steps" });
  const logBody = h("tbody");
  const logNote = h("p", { class: "muted small" });
  const stepEls = new Map<
    string,
    { details: HTMLDetailsElement; summary: HTMLElement; body: HTMLElement; sig: string }
  >();

  const renderTimeline = () => {
    if (!view) return;
    const t = (timeline = buildTimeline(
      view.steps.map((s) => s.stepId),
      events,
    ));
    replace(timelineSlot, timelineView(t, Date.now(), timelineSlot.clientWidth || 900));
    clearInterval(ticker);
    ticker = undefined;
    // open bars grow with the clock
    if (t.open && !stopped)
      ticker = setInterval(() => {
        if (!document.hidden) renderTimeline();
      }, 1_000);
  };

  const select = (stepId: string) => {
    const s = stepEls.get(stepId);
    if (!s) return;
    s.details.open = true;
    s.details.scrollIntoView({ block: "nearest" });
    s.summary.focus();
  };

  const stepStatus = (s: StepView) => eventStatus.get(s.stepId) ?? s.status;

  const stepBody = (s: StepView) => [
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "Skill"),
      h("dd", {}, h("code", {}, s.skillName)),
      h("dt", {}, "Depends on"),
      h("dd", {}, s.dependsOn.length ? s.dependsOn.join(", ") : "—"),
      h("dt", {}, "Attempts"),
      h("dd", {}, String(s.attempts)),
      h("dt", {}, "Started"),
      h("dd", {}, s.startedAt ? new Date(s.startedAt).toLocaleString() : "—"),
      h("dt", {}, "Finished"),
      h("dd", {}, s.finishedAt ? new Date(s.finishedAt).toLocaleString() : "—"),
      h("dt", {}, "Rollback"),
      h("dd", { "data-testid": "rollback" }, s.rollback ? badge(s.rollback.status) : "—"),
      s.decision ? [h("dt", {}, "Decision"), h("dd", { "data-testid": "decision" }, decisionText(s.decision))] : null,
      s.usedFallback ? [h("dt", {}, "Fallback"), h("dd", {}, "used")] : null,
      s.retrySuppressed ? [h("dt", {}, "Retry suppressed"), h("dd", {}, s.retrySuppressed)] : null,
    ),
    h("h3", {}, "Input (resolved arguments)"),
    valueView(s.input, "Input"),
    h("h3", {}, "Output"),
    h("div", { "data-testid": "output" }, valueView(s.output, "Output")),
    s.error ? errorView(s, s.error) : null,
    s.rollback?.error
      ? [
          h("h3", {}, "Rollback error"),
          h("div", { class: "error-box" }, h("strong", {}, s.rollback.error.code), ": ", s.rollback.error.message),
        ]
      : null,
  ];

  /** Working time (attempts and back-offs), apart from any time spent waiting for a person. */
  const tookText = (s: StepView): string | null => {
    const lane = timeline?.lanes.find((l) => l.stepId === s.stepId);
    const work = activeMs(lane, Date.now());
    const waited = (lane?.segments ?? [])
      .filter((x) => x.kind === "waiting" || x.kind === "decision")
      .reduce((sum, x) => sum + Math.max(0, (x.end ?? Date.now()) - x.start), 0);
    if (work === null) return waited ? `waited ${age(waited)} for a decision` : null;
    return `${duration(work)}${waited ? ` (+ ${age(waited)} waiting for a decision)` : ""}`;
  };

  const renderSteps = () => {
    if (!view) return;
    for (const s of view.steps) {
      let e = stepEls.get(s.stepId);
      if (!e) {
        const summary = h("summary");
        const body = h("div", { class: "step-body" });
        const details = h("details", { class: "step", "data-step": s.stepId }, summary, body);
        e = { details, summary, body, sig: "" };
        stepEls.set(s.stepId, e);
        stepsSlot.appendChild(details);
      }
      const st = stepStatus(s);
      const took = tookText(s);
      replace(
        e.summary,
        h("code", {}, s.stepId),
        " ",
        badge(st),
        h(
          "span",
          { class: "muted small" },
          ` ${s.skillName}${s.attempts > 1 ? ` · ${s.attempts} attempts` : ""}${took ? ` · ${took}` : ""}${s.rollback ? ` · rollback ${humanStatus(s.rollback.status)}` : ""}`,
        ),
      );
      e.details.setAttribute("data-status", st);
      // rebuild the body only when its content changed (keeps scroll and focus)
      const sig = JSON.stringify([
        s.input,
        s.output,
        s.error,
        s.rollback,
        s.attempts,
        s.startedAt,
        s.finishedAt,
        s.usedFallback,
        s.retrySuppressed,
        s.decision,
        st,
      ]);
      if (sig !== e.sig) {
        e.sig = sig;
        replace(e.body, stepBody(s));
      }
    }
  };

  const renderPending = () => {
    if (!view?.pendingConfirmations.length) return replace(pendingSlot);
    replace(
      pendingSlot,
      h(
        "section",
        { class: "pending", "aria-labelledby": "pending-h" },
        h("h2", { id: "pending-h" }, "Waiting for a decision"),
        h(
          "ul",
          {},
          view.pendingConfirmations.map((p) => {
            const kind = kindOf(p);
            const btn = h(
              "button",
              { type: "button", class: "btn primary", "data-step": p.stepId, "data-testid": "review" },
              "Review…",
            );
            btn.addEventListener("click", async () => {
              const dialog = openDecisionDialog(ctx, { runId, pending: p });
              open = { stepId: p.stepId, dialog };
              const sent = await dialog.closed;
              open = undefined;
              if (sent) {
                follower?.poke();
                ctx.pendingChanged();
                void loadView();
                title.focus();
              } else if (btn.isConnected) btn.focus();
              else title.focus();
            });
            const a = (p as { approval?: ApprovalState }).approval;
            const approvals = a?.given.filter((g) => g.decision === "approve") ?? [];
            return h(
              "li",
              {},
              h("span", { class: `kind kind-${kind}` }, KIND_LABEL[kind]),
              " ",
              h("code", {}, p.stepId),
              h("span", { class: "muted" }, ` ${p.skillName} `),
              a
                ? h(
                    "span",
                    { class: "small", "data-testid": "quorum" },
                    `${approvals.length} of ${a.required} approved`,
                    approvals.length ? ` (${approvals.map((g) => (g.by ? actorName(g.by) : "?")).join(", ")})` : "",
                    a.required - approvals.length > 0 ? ` · ${a.required - approvals.length} more needed ` : " ",
                  )
                : null,
              btn,
            );
          }),
        ),
      ),
    );
  };

  const renderHead = () => {
    if (!view) return;
    title.textContent = view.plan.goal || view.plan.planId || "Run";
    replace(statusSlot, badge(view.status));
    replace(
      meta,
      "Run ",
      h("code", {}, view.runId),
      ` · trace ${view.traceId} · created ${new Date(view.createdAt).toLocaleString()} · ${view.steps.length} steps · rollback ${view.plan.rollbackMode ?? "best_effort"}`,
    );
    cancelBtn.hidden = TERMINAL_RUN.has(view.status) || ctx.me?.may.cancel === false;
    // the statuses a redrive starts from (the API says why when it refuses one, e.g. compensated steps)
    redriveBtn.hidden = !REDRIVABLE_RUN.has(view.status) || ctx.me?.may.redrive === false;
    replace(
      errorSlot,
      view.error
        ? view.error.code === "REJECTED" || view.error.code === "CANCELLED"
          ? h(
              "div",
              { class: "note-box", "data-testid": "run-outcome" },
              h("strong", {}, view.error.code === "REJECTED" ? "Rejected" : "Cancelled"),
              ": ",
              view.error.message,
            )
          : h("div", { class: "error-box", role: "alert" }, h("strong", {}, view.error.code), ": ", view.error.message)
        : null,
    );
  };

  const renderAll = () => {
    if (!view) return;
    renderHead();
    renderPending();
    if (!dag) {
      dag = dagView(view.graph.nodes, view.graph.edges, select);
      replace(
        dagSlot,
        dag.el,
        h(
          "ul",
          { class: "legend", "aria-label": "Status colours" },
          LEGEND.map((s) => h("li", {}, h("span", { class: `swatch st-${s}` }), humanStatus(s))),
        ),
      );
    }
    for (const s of view.steps) dag.setStatus(s.stepId, stepStatus(s));
    renderTimeline();
    renderSteps();
  };

  const logRow = (e: RunEvent) =>
    h(
      "tr",
      { "data-seq": e.seq, "data-type": e.type },
      h("td", { class: "num" }, e.seq),
      h(
        "td",
        { class: "mono small" },
        new Date(e.at).toLocaleTimeString(undefined, { hour12: false }) +
          `.${String(new Date(e.at).getMilliseconds()).padStart(3, "0")}`,
      ),
      h("td", {}, h("code", {}, e.type)),
      h("td", {}, e.stepId ?? ""),
      h("td", { class: "mono small data" }, compact(e.data, 400)),
    );

  const addEvents = (list: readonly RunEvent[]) => {
    const fresh = list.filter((e) => !seen.has(e.seq)).sort((a, b) => a.seq - b.seq);
    if (!fresh.length) return;
    for (const e of fresh) {
      seen.add(e.seq);
      events.push(e);
      applyLiveEvent(view, eventStatus, e);
      // a decision made elsewhere while this page's dialog is open on that step
      const decided = decidedBy(e);
      if (decided && open && (e.type === "run_cancel_requested" || e.stepId === open.stepId))
        open.dialog.decidedElsewhere(decided);
    }
    const atBottom =
      logBody.parentElement!.parentElement!.scrollTop + logBody.parentElement!.parentElement!.clientHeight >=
      logBody.parentElement!.parentElement!.scrollHeight - 8;
    for (const e of fresh.slice(-LOG_MAX)) logBody.appendChild(logRow(e));
    while (logBody.childElementCount > LOG_MAX) logBody.firstElementChild!.remove();
    logNote.textContent =
      events.length > LOG_MAX ? `Showing the last ${LOG_MAX} of ${events.length} events.` : `${events.length} events.`;
    if (atBottom) logBody.parentElement!.parentElement!.scrollTop = logBody.parentElement!.parentElement!.scrollHeight;
    if (view && dag)
      for (const e of fresh)
        if (e.stepId && eventStatus.has(e.stepId)) dag.setStatus(e.stepId, eventStatus.get(e.stepId)!);
    if (view) {
      renderHead();
      renderTimeline();
    }
    scheduleViewRefresh();
  };

  const scheduleViewRefresh = () => {
    if (refetch !== undefined || stopped) return;
    refetch = setTimeout(() => {
      refetch = undefined;
      void loadView();
    }, 250);
  };

  async function loadView(): Promise<void> {
    try {
      const v = await ctx.api.getRun(runId);
      if (stopped) return;
      view = v;
      renderAll();
    } catch (e) {
      if (!stopped && !view)
        replace(
          dagSlot,
          h("p", { class: "error-box", role: "alert" }, `Could not load run ${runId}: ${(e as Error).message}`),
        );
    }
  }

  const onState = (s: FollowState, detail?: string) => {
    live.textContent =
      s === "live"
        ? "● live"
        : s === "ended"
          ? "finished"
          : s === "error"
            ? `stream error${detail ? `: ${detail}` : ""}`
            : `${s}…`;
    live.setAttribute("data-state", s);
    if (s === "ended") scheduleViewRefresh();
  };

  cancelBtn.addEventListener("click", async () => {
    if (await askCancel(ctx, runId)) {
      follower?.poke();
      ctx.pendingChanged();
      title.focus();
    } else cancelBtn.focus();
  });

  redriveBtn.addEventListener("click", async () => {
    if (await askRedrive(ctx, runId)) {
      follower?.poke();
      scheduleViewRefresh();
      title.focus();
    } else redriveBtn.focus();
  });

  replace(
    el,
    h(
      "section",
      { class: "page run" },
      h("p", {}, h("a", { href: "#/runs" }, "← Runs")),
      h(
        "div",
        { class: "page-head" },
        h("div", {}, title, h("div", { class: "row" }, statusSlot, live)),
        h("div", { class: "row" }, cancelBtn, redriveBtn),
      ),
      meta,
      errorSlot,
      pendingSlot,
      h("section", { "aria-labelledby": "dag-h" }, h("h2", { id: "dag-h" }, "Plan"), dagSlot),
      h("section", { "aria-labelledby": "tl-h" }, h("h2", { id: "tl-h" }, "Timeline"), timelineSlot),
      h("section", { "aria-labelledby": "steps-h" }, h("h2", { id: "steps-h" }, "Steps"), stepsSlot),
      h(
        "section",
        { "aria-labelledby": "log-h" },
        h("h2", { id: "log-h" }, "Event log"),
        h(
          "div",
          { class: "table-wrap log", tabindex: 0, "aria-label": "Event log" },
          h(
            "table",
            { class: "events", "data-testid": "event-log" },
            h(
              "thead",
              {},
              h(
                "tr",
                {},
                ["#", "Time", "Type", "Step", "Data"].map((c) => h("th", { scope: "col" }, c)),
              ),
            ),
            logBody,
          ),
        ),
        logNote,
      ),
    ),
  );

  void (async () => {
    await loadView();
    let after = 0;
    try {
      const stored = await ctx.api.events(runId, 0);
      if (stopped) return;
      addEvents(stored);
      after = stored.reduce((m, e) => Math.max(m, e.seq), 0);
    } catch (e) {
      if (!stopped) ctx.notify(`Could not load events: ${(e as Error).message}`, "error");
    }
    if (!stopped) follower = followRun(ctx.api, runId, after, { event: (e) => addEvents([e]), state: onState });
  })();

  const onResize = () => renderTimeline();
  window.addEventListener("resize", onResize);
  return () => {
    stopped = true;
    follower?.close();
    clearTimeout(refetch);
    clearInterval(ticker);
    window.removeEventListener("resize", onResize);
  };
}
