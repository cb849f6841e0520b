/**
 * Cancelling a run, with a reason recorded in its history (the run_cancel_requested event and the
 * run's error say it). Resolves true when the cancel was sent.
 */
import type { Ctx } from "../context.js";
import { h, uid } from "../dom.js";

export function askCancel(ctx: Ctx, runId: string): Promise<boolean> {
  const titleId = uid("cancel-title");
  const reasonId = uid("reason");
  const reason = h("textarea", { id: reasonId, rows: 3, maxlength: 2000, "data-testid": "cancel-reason" });
  const error = h("div", { class: "form-error", role: "alert" });
  const go = h("button", { type: "submit", class: "btn danger" }, "Cancel the run");
  const dlg = h("dialog", { class: "decision small-dialog", "aria-labelledby": titleId });
  let sent = false;
  const form = h(
    "form",
    { class: "dialog-body", method: "dialog" },
    h("h2", { id: titleId }, `Cancel run ${runId}?`),
    h("p", {}, "Running steps are aborted and completed work is compensated (rolled back where it can be)."),
    h("div", { class: "field" }, h("label", { for: reasonId }, "Reason (recorded with the cancel)"), reason),
    error,
    h(
      "footer",
      { class: "row" },
      go,
      h("button", { type: "button", class: "btn", onclick: () => dlg.close() }, "Keep it running"),
    ),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    go.disabled = true;
    try {
      await ctx.api.cancel(runId, reason.value.trim() || "cancelled from the console");
      sent = true;
      ctx.notify(`Cancelling run ${runId}.`);
      dlg.close();
    } catch (err) {
      error.textContent = `Could not cancel: ${(err as Error).message}`;
      go.disabled = false;
    }
  });
  dlg.append(form);
  document.body.appendChild(dlg);
  return new Promise((resolve) => {
    dlg.addEventListener(
      "close",
      () => {
        dlg.remove();
        resolve(sent);
      },
      { once: true },
    );
    dlg.showModal();
    reason.focus();
  });
}
