/**
 * Redriving a failed run from its page, after a confirmation that says what a redrive does
 * (README, Redrive). A refusal shows the API's code and message (RUN_NOT_REDRIVABLE,
 * RUN_BEING_DRIVEN, REDRIVE_COMPENSATED, …) in the dialog. Resolves true when the run was redriven.
 */
import { ApiError } from "../api.js";
import type { Ctx } from "../context.js";
import { h, uid } from "../dom.js";

export function askRedrive(ctx: Ctx, runId: string): Promise<boolean> {
  const titleId = uid("redrive-title");
  const error = h("div", { class: "form-error", role: "alert", "data-testid": "redrive-error" });
  const go = h("button", { type: "submit", class: "btn primary", "data-testid": "redrive-confirm" }, "Redrive the run");
  const dlg = h("dialog", { class: "decision small-dialog", "aria-labelledby": titleId });
  let sent = false;
  const form = h(
    "form",
    { class: "dialog-body", method: "dialog" },
    h("h2", { id: titleId }, `Redrive run ${runId}?`),
    h(
      "p",
      {},
      "Completed steps keep their outputs and are not run again; the failed, skipped and cancelled steps run again with the same idempotency keys. A step whose effect may have happened is reconciled (or asks a person) first.",
    ),
    error,
    h(
      "footer",
      { class: "row" },
      go,
      h("button", { type: "button", class: "btn", onclick: () => dlg.close() }, "Leave it failed"),
    ),
  );
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    go.disabled = true;
    try {
      await ctx.api.redrive(runId);
      sent = true;
      ctx.notify(`Redriving run ${runId}.`);
      dlg.close();
    } catch (err) {
      error.textContent =
        err instanceof ApiError ? `${err.code}: ${err.message}` : `Could not redrive: ${(err as Error).message}`;
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
    go.focus();
  });
}
