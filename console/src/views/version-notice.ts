/**
 * What a deploy changed while a step waited (`versionChanged`): the version that computed the
 * preview shown, the one that will run, and where its arguments or preview now differ, or why they
 * no longer validate. Nothing when the step runs under the version that computed its preview.
 */
import { h } from "../dom.js";
import { diffJson } from "../model/diff.js";
import type { PendingDecision } from "../model/types.js";
import { changeList } from "./changes.js";

export function versionNotice(pending: PendingDecision): HTMLElement | null {
  const vc = pending.versionChanged;
  if (!vc) return null;
  return h(
    "section",
    { class: "version-changed", role: "note", "aria-label": "Skill version changed", "data-testid": "version-changed" },
    h(
      "p",
      {},
      h("strong", {}, "The skill changed while this step waited: "),
      h("code", {}, `${pending.skillName} ${vc.from.version}`),
      " → ",
      h("code", {}, vc.to.version),
      ". Approving runs the new version.",
    ),
    vc.error
      ? h("p", { class: "form-error", "data-testid": "version-error" }, `${vc.error.code}: ${vc.error.message}`)
      : null,
    vc.arguments !== undefined
      ? [
          h("p", { class: "small" }, "Its arguments, as the new version runs them:"),
          changeList(diffJson(pending.arguments, vc.arguments), "Migrated arguments"),
        ]
      : null,
    vc.preview !== undefined
      ? [
          h("p", { class: "small" }, "The preview would now differ from the one shown when it began waiting:"),
          changeList(diffJson(pending.preview, vc.preview), "Changed preview"),
        ]
      : null,
  );
}
