/**
 * The decision dialog. It opens at a summary of the effect (effect-summary.ts: what, to what, how
 * many, through which channel, whether it can be undone) with focus on it; the preview follows;
 * the arguments are collapsed below. Edited arguments are validated against the skill's schema
 * here and previewed by the server (the skill's own preview), with the changes listed before
 * Approve (changes.ts). A decision made elsewhere while it is open is announced ("Approved by …
 * just now") and its actions disabled.
 */
import { ApiError, type ConfirmBody } from "../api.js";
import type { Ctx } from "../context.js";
import { h, replace, uid } from "../dom.js";
import {
  actionsFor,
  actorName,
  KIND_LABEL,
  kindOf,
  type DecisionAction,
  type DecidedInfo,
} from "../model/decisions.js";
import { diffJson } from "../model/diff.js";
import { jsonEqual, pretty } from "../model/format.js";
import type { ApprovalState, PendingDecision, SkillInfo } from "../model/types.js";
import { validateJson, type Validation } from "../model/validate.js";
import { changesView } from "./changes.js";
import { versionNotice } from "./version-notice.js";
import { approvalsView, effectView } from "./effect-summary.js";
import { planGanttOf } from "./plan-gantt.js";
import { jsonBlock, valueView } from "./values.js";

export interface DialogInput {
  runId: string;
  pending: PendingDecision;
}

export interface DecisionDialog {
  /** The decision sent from this dialog, or null when closed without one. */
  closed: Promise<string | null>;
  /** Someone else decided this step: say so and disable the actions. */
  decidedElsewhere(info: DecidedInfo): void;
}

const PREVIEW_DEBOUNCE_MS = 300;

/** Opens the dialog; `closed` resolves with the decision sent, or null. */
export function openDecisionDialog(ctx: Ctx, input: DialogInput): DecisionDialog {
  let decidedElsewhere: (info: DecidedInfo) => void = () => undefined;
  let early: DecidedInfo | undefined;
  const closed = (async () => {
    let skill: SkillInfo | undefined;
    try {
      skill = (await ctx.api.skills()).find((s) => s.name === input.pending.skillName);
    } catch {
      skill = undefined;
    }
    return show(ctx, input, skill, (f) => {
      decidedElsewhere = f;
      if (early) f(early);
    });
  })();
  return {
    closed,
    decidedElsewhere: (info) => {
      early = info;
      decidedElsewhere(info);
    },
  };
}

function show(
  ctx: Ctx,
  { runId, pending }: DialogInput,
  skill: SkillInfo | undefined,
  onElsewhere: (f: (info: DecidedInfo) => void) => void,
): Promise<string | null> {
  const kind = kindOf(pending);
  const actions = actionsFor(kind);
  const titleId = uid("dlg-title");
  const summaryId = uid("dlg-summary");
  const errorBox = h("div", { class: "form-error", role: "alert" });
  const elsewhereBox = h("div", { class: "decided-elsewhere", role: "alert", "data-testid": "decided-elsewhere" });
  const dlg = h("dialog", { class: "decision", "aria-labelledby": titleId, "aria-describedby": summaryId });
  const approval = (pending as { approval?: ApprovalState }).approval;

  // the editor: arguments (confirmation) or output (mark done)
  const editsArgs = actions.some((a) => a.sends === "arguments");
  const editsOutput = actions.some((a) => a.sends === "output");
  const editorId = uid("editor");
  const problemsId = uid("problems");
  // after a deploy, the arguments as the new version runs them are the ones to edit (its schema checks them)
  const original = editsArgs ? (pending.versionChanged?.arguments ?? pending.arguments) : undefined;
  const editor = h("textarea", {
    id: editorId,
    class: "editor",
    rows: 12,
    spellcheck: "false",
    autocomplete: "off",
    "aria-describedby": problemsId,
    "data-testid": "decision-editor",
  });
  editor.value = editsArgs ? pretty(original ?? {}) : "";
  const problems = h("ul", { id: problemsId, class: "problems", "aria-live": "polite" });
  const schema = editsArgs ? skill?.inputSchema : skill?.outputSchema;
  let validation: Validation = { ok: true, problems: [] };
  const buttons = new Map<DecisionAction, HTMLButtonElement>();
  let decided = false;

  // the preview shown: the step's own, or the server's for the edited arguments
  const previewBody = h("div", { "data-testid": "preview" });
  const previewState = h("p", { class: "muted small", "aria-live": "polite", "data-testid": "preview-state" });
  const diffSlot = h("div", { "data-testid": "diff" });
  const summarySlot = h("div");
  let previewFor: unknown = original; // the arguments the preview shown belongs to
  // after a deploy: the new version's preview (the one shown when the step began waiting is in the notice)
  const basePreview = pending.versionChanged?.preview ?? pending.preview;
  let previewShown: unknown = basePreview;
  let previewCtl: AbortController | undefined;
  let previewTimer: ReturnType<typeof setTimeout> | undefined;
  let previewBusy = false;

  const renderSummary = () => {
    const args = editsArgs && validation.ok && validation.value !== undefined ? validation.value : pending.arguments;
    replace(summarySlot, effectView(kind, pending, skill, previewShown, args));
  };

  const renderPreview = () => {
    replace(
      previewBody,
      kind === "compensation"
        ? jsonBlock((pending.preview as { error?: unknown } | null)?.error ?? pending.preview, "compensation error")
        : [
            // a records write's schedule as a chart, then the preview itself
            kind === "confirmation" ? planGanttOf(previewShown) : null,
            valueView(kind === "in_doubt" ? pending.arguments : previewShown, "Preview"),
          ],
    );
  };

  const edited = () => editsArgs && validation.ok && !jsonEqual(validation.value, original);
  const syncButtons = () => {
    for (const [a, b] of buttons) {
      b.disabled = decided || (a.sends !== undefined && !validation.ok) || (a.sends === "arguments" && previewBusy);
    }
  };

  const renderDiff = () => {
    if (!edited()) return replace(diffSlot);
    const argChanges = diffJson(original, validation.value);
    const current = jsonEqual(previewFor, validation.value);
    replace(
      diffSlot,
      changesView(
        `${titleId}-diff`,
        argChanges,
        current && !jsonEqual(previewShown, basePreview) ? diffJson(basePreview, previewShown) : null,
      ),
    );
  };

  const refreshPreview = () => {
    clearTimeout(previewTimer);
    previewCtl?.abort();
    if (!editsArgs || kind !== "confirmation") return;
    if (!validation.ok) {
      previewBusy = false;
      previewState.textContent = "Fix the arguments to see their preview.";
      return syncButtons();
    }
    const want = validation.value;
    if (jsonEqual(want, previewFor)) {
      previewBusy = false;
      previewState.textContent = edited()
        ? "Preview recomputed by the skill for your edited arguments."
        : "Preview of the arguments as planned.";
      renderDiff();
      return syncButtons();
    }
    if (jsonEqual(want, original)) {
      previewFor = original;
      previewShown = basePreview;
      previewBusy = false;
      previewState.textContent = "Preview of the arguments as planned.";
      renderPreview();
      renderSummary();
      renderDiff();
      return syncButtons();
    }
    previewBusy = true;
    previewState.textContent = "Updating the preview for your edited arguments…";
    syncButtons();
    renderDiff();
    previewTimer = setTimeout(async () => {
      const ctl = (previewCtl = new AbortController());
      try {
        const r = await ctx.api.preview(
          runId,
          pending.stepId,
          {
            arguments: want as Record<string, unknown>,
            ...(typeof pending.round === "number" ? { round: pending.round } : {}),
          },
          ctl.signal,
        );
        if (ctl.signal.aborted) return;
        previewFor = want;
        previewShown = r.ok ? (r.preview ?? null) : null;
        previewState.textContent = r.ok
          ? "Preview recomputed by the skill for your edited arguments."
          : `The skill's preview failed for these arguments: ${r.error?.code}: ${r.error?.message}`;
        renderPreview();
        renderSummary();
      } catch (e) {
        if (ctl.signal.aborted) return;
        previewState.textContent =
          e instanceof ApiError ? `${e.code}: ${e.message}` : `Could not preview: ${(e as Error).message}`;
        if (e instanceof ApiError && e.code === "CONFIRMATION_NOT_PENDING") return;
      } finally {
        if (!ctl.signal.aborted) {
          previewBusy = false;
          syncButtons();
          renderDiff();
        }
      }
    }, PREVIEW_DEBOUNCE_MS);
  };

  const check = () => {
    validation = validateJson(editor.value, schema, { object: editsArgs, optional: editsOutput });
    replace(
      problems,
      validation.ok
        ? h("li", { class: "ok" }, schema ? "Valid against the skill's schema." : "Valid JSON.")
        : validation.problems.map((p) => h("li", {}, p)),
    );
    editor.setAttribute("aria-invalid", validation.ok ? "false" : "true");
    syncButtons();
  };
  editor.addEventListener("input", () => {
    check();
    refreshPreview();
  });

  const commentId = uid("comment");
  const comment = h("textarea", { id: commentId, rows: 2, maxlength: 4000, "data-testid": "decision-comment" });

  let sent: string | null = null;
  const send = async (a: DecisionAction, btn: HTMLButtonElement) => {
    if (decided || (a.sends && !validation.ok)) return;
    const body: ConfirmBody = { stepId: pending.stepId, decision: a.decision };
    if (typeof pending.round === "number") body.round = pending.round;
    if (a.sends === "arguments" && validation.value !== undefined && !jsonEqual(validation.value, original))
      body.arguments = validation.value as Record<string, unknown>;
    if (a.sends === "output" && validation.value !== undefined) body.output = validation.value;
    if (comment.value.trim()) body.comment = comment.value.trim();
    for (const b of buttons.values()) b.disabled = true;
    btn.setAttribute("aria-busy", "true");
    replace(errorBox);
    try {
      await ctx.api.confirm(runId, body);
      sent = a.decision;
      ctx.notify(`${a.label}: step ${pending.stepId} of run ${runId}${body.arguments ? " (arguments edited)" : ""}.`);
      dlg.close();
    } catch (e) {
      const msg =
        e instanceof ApiError
          ? e.code === "CONFIRMATION_NOT_PENDING"
            ? `Already decided: ${e.message}`
            : `${e.code}: ${e.message}`
          : String(e);
      replace(errorBox, msg);
      if (editsArgs || editsOutput) check();
      else syncButtons();
    } finally {
      btn.removeAttribute("aria-busy");
    }
  };
  for (const a of actions) {
    const b = h("button", { type: "button", class: `btn ${a.tone}`, "data-decision": a.decision });
    b.textContent = a.label;
    b.addEventListener("click", () => void send(a, b));
    buttons.set(a, b);
  }

  onElsewhere((info) => {
    if (sent || decided) return;
    decided = true;
    syncButtons();
    replace(
      elsewhereBox,
      h("strong", {}, `${info.label} by ${info.by ? actorName(info.by) : "someone else"}`),
      info.via ? ` via ${info.via}` : "",
      " just now. Nothing more to decide here.",
    );
  });

  const summary = h(
    "section",
    { class: "effect-summary", id: summaryId, tabindex: -1, "aria-label": "Summary", "data-testid": "effect-summary" },
    summarySlot,
    versionNotice(pending),
    approvalsView(approval),
  );

  const argsSection =
    editsArgs || editsOutput
      ? h(
          "details",
          { class: "args", "data-testid": "arguments" },
          h("summary", {}, editsArgs ? "Arguments (edit before approving)" : "Output for “Mark done” (optional)"),
          h(
            "label",
            { for: editorId },
            editsArgs ? "Arguments (JSON; sent only if you change them)" : "Output for “Mark done” (JSON, optional)",
          ),
          editor,
          problems,
          editsArgs
            ? h(
                "div",
                { class: "row" },
                h(
                  "button",
                  {
                    type: "button",
                    class: "btn link",
                    onclick: () => {
                      editor.value = pretty(original ?? {});
                      check();
                      refreshPreview();
                    },
                  },
                  "Reset arguments",
                ),
              )
            : null,
        )
      : null;

  replace(
    dlg,
    h(
      "form",
      { method: "dialog", class: "dialog-body", onsubmit: (e: Event) => e.preventDefault() },
      h(
        "header",
        {},
        h("h2", { id: titleId }, `${KIND_LABEL[kind]}: step ${pending.stepId}`),
        h(
          "p",
          { class: "muted small" },
          "Run ",
          h("a", { href: `#/runs/${encodeURIComponent(runId)}`, onclick: () => dlg.close() }, runId),
          skill?.description ? ` · ${skill.description}` : "",
        ),
      ),
      summary,
      elsewhereBox,
      h(
        "section",
        { "aria-labelledby": `${titleId}-pv` },
        h(
          "h3",
          { id: `${titleId}-pv` },
          kind === "compensation" ? "Compensation error" : kind === "in_doubt" ? "What was being done" : "Preview",
        ),
        previewState,
        previewBody,
      ),
      diffSlot,
      argsSection,
      h(
        "div",
        { class: "field" },
        h("label", { for: commentId }, "Comment (optional, recorded with the decision)"),
        comment,
      ),
      errorBox,
      h(
        "footer",
        { class: "row" },
        [...buttons.values()],
        h("button", { type: "button", class: "btn", value: "close", onclick: () => dlg.close() }, "Close"),
      ),
    ),
  );
  if (editsArgs || editsOutput) check();
  if (editsArgs && kind === "confirmation") previewState.textContent = "Preview of the arguments as planned.";
  renderSummary();
  renderPreview();
  document.body.appendChild(dlg);
  return new Promise((resolve) => {
    dlg.addEventListener(
      "close",
      () => {
        clearTimeout(previewTimer);
        previewCtl?.abort();
        dlg.remove();
        resolve(sent);
      },
      { once: true },
    );
    dlg.showModal();
    summary.focus();
    dlg.scrollTop = 0;
  });
}
