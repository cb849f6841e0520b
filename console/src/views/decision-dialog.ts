/**
 * The decision dialog: the preview (records as tables), the resolved arguments in a JSON editor
 * validated against the skill's input schema, a comment, and the actions for this kind of
 * decision. Sends through POST /runs/:id/confirm.
 */
import { ApiError, type ConfirmBody } from "../api.js";
import type { Ctx } from "../context.js";
import { h, replace, uid } from "../dom.js";
import { actionsFor, KIND_LABEL, kindOf, type DecisionAction } from "../model/decisions.js";
import { jsonEqual, pretty } from "../model/format.js";
import type { PendingDecision, SkillInfo } from "../model/types.js";
import { validateJson, type Validation } from "../model/validate.js";
import { jsonBlock, valueView } from "./values.js";

export interface DialogInput {
  runId: string;
  pending: PendingDecision;
}

/** Opens the dialog; resolves with the decision sent, or null when closed without one. */
export async function openDecisionDialog(ctx: Ctx, input: DialogInput): Promise<string | null> {
  const { runId, pending } = input;
  const kind = kindOf(pending);
  let skill: SkillInfo | undefined;
  try {
    skill = (await ctx.api.skills()).find((s) => s.name === pending.skillName);
  } catch {
    skill = undefined;
  }
  const actions = actionsFor(kind);
  const titleId = uid("dlg-title");
  const errorBox = h("div", { class: "form-error", role: "alert" });
  const dlg = h("dialog", { class: "decision", "aria-labelledby": titleId });

  // the editor: arguments (confirmation) or output (mark done)
  const editsArgs = actions.some((a) => a.sends === "arguments");
  const editsOutput = actions.some((a) => a.sends === "output");
  const editorId = uid("editor");
  const problemsId = uid("problems");
  const original = editsArgs ? pending.arguments : undefined;
  const editor = h("textarea", { id: editorId, class: "editor", rows: 12, spellcheck: "false", autocomplete: "off", "aria-describedby": problemsId, "data-testid": "decision-editor" });
  editor.value = editsArgs ? pretty(pending.arguments ?? {}) : "";
  const problems = h("ul", { id: problemsId, class: "problems", "aria-live": "polite" });
  const schema = editsArgs ? skill?.inputSchema : skill?.outputSchema;
  let validation: Validation = { ok: true, problems: [] };
  const buttons = new Map<DecisionAction, HTMLButtonElement>();
  const check = () => {
    validation = validateJson(editor.value, schema, { object: editsArgs, optional: editsOutput });
    replace(problems, validation.ok ? h("li", { class: "ok" }, schema ? "Valid against the skill's schema." : "Valid JSON.") : validation.problems.map((p) => h("li", {}, p)));
    editor.setAttribute("aria-invalid", validation.ok ? "false" : "true");
    for (const [a, b] of buttons) if (a.sends) b.disabled = !validation.ok;
  };
  editor.addEventListener("input", check);

  const commentId = uid("comment");
  const comment = h("textarea", { id: commentId, rows: 2, maxlength: 4000, "data-testid": "decision-comment" });

  let sent: string | null = null;
  const send = async (a: DecisionAction, btn: HTMLButtonElement) => {
    if (a.sends && !validation.ok) return;
    const body: ConfirmBody = { stepId: pending.stepId, decision: a.decision };
    if (typeof pending.round === "number") body.round = pending.round;
    if (a.sends === "arguments" && validation.value !== undefined && !jsonEqual(validation.value, original)) body.arguments = validation.value as Record<string, unknown>;
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
      const msg = e instanceof ApiError ? (e.code === "CONFIRMATION_NOT_PENDING" ? `Already decided: ${e.message}` : `${e.code}: ${e.message}`) : String(e);
      replace(errorBox, msg);
      for (const b of buttons.values()) b.disabled = false;
      if (editsArgs || editsOutput) check();
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

  const previewSection = kind === "compensation"
    ? h("section", {}, h("h3", {}, "Compensation error"), jsonBlock((pending.preview as { error?: unknown } | null)?.error ?? pending.preview, "compensation error"))
    : h("section", {}, h("h3", {}, kind === "in_doubt" ? "What was being done" : "Preview"), valueView(kind === "in_doubt" ? pending.arguments : pending.preview, "Preview"));
  const explain = kind === "in_doubt"
    ? h("p", {}, "The process running this step died during its effect; the runtime cannot tell whether it happened. Retry it, mark it done (optionally with its output), or fail it.")
    : kind === "compensation"
      ? h("p", {}, "Strict rollback stopped because this step's compensation failed for good. Retry the compensation, skip it (leave the step undone and continue), or stop the rollback.")
      : null;

  const editorSection = editsArgs || editsOutput
    ? h("section", {},
        h("label", { for: editorId }, editsArgs ? "Arguments (JSON; sent only if you change them)" : "Output for “Mark done” (JSON, optional)"),
        editor,
        problems,
        h("div", { class: "row" }, editsArgs ? h("button", { type: "button", class: "btn link", onclick: () => { editor.value = pretty(pending.arguments ?? {}); check(); } }, "Reset arguments") : null),
      )
    : null;

  replace(dlg,
    h("form", { method: "dialog", class: "dialog-body", onsubmit: (e: Event) => e.preventDefault() },
      h("header", {},
        h("h2", { id: titleId }, `${KIND_LABEL[kind]}: step ${pending.stepId}`),
        h("p", { class: "muted" }, "Run ", h("a", { href: `#/runs/${encodeURIComponent(runId)}`, onclick: () => dlg.close() }, runId), " · skill ", h("code", {}, pending.skillName), skill?.description ? ` · ${skill.description}` : ""),
      ),
      explain,
      previewSection,
      editorSection,
      h("section", {}, h("label", { for: commentId }, "Comment (optional, recorded with the decision)"), comment),
      errorBox,
      h("footer", { class: "row" }, [...buttons.values()], h("button", { type: "button", class: "btn", value: "close", onclick: () => dlg.close() }, "Close")),
    ),
  );
  if (editsArgs || editsOutput) check();
  document.body.appendChild(dlg);
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => {
      dlg.remove();
      resolve(sent);
    }, { once: true });
    dlg.showModal();
    (editsArgs ? editor : [...buttons.values()][0])?.focus();
  });
}
