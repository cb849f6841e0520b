/** The changes an approver made to the arguments, and what the preview now says differently. */
import { h } from "../dom.js";
import type { Change } from "../model/diff.js";
import { compact } from "../model/format.js";

export const changeList = (changes: Change[], what: string) =>
  h(
    "ul",
    { class: "changes", "aria-label": what },
    changes
      .slice(0, 30)
      .map((c) =>
        h(
          "li",
          { "data-kind": c.kind },
          h("code", {}, c.path || "/"),
          c.kind === "added"
            ? ` added: ${compact(c.after, 160)}`
            : c.kind === "removed"
              ? ` removed (was ${compact(c.before, 160)})`
              : ` ${compact(c.before, 80)} → ${compact(c.after, 80)}`,
        ),
      ),
    changes.length > 30 ? h("li", { class: "muted" }, `… and ${changes.length - 30} more`) : null,
  );

export function changesView(headingId: string, argChanges: Change[], previewChanges: Change[] | null): HTMLElement {
  return h(
    "section",
    { class: "diff", "aria-labelledby": headingId },
    h("h3", { id: headingId }, "Your changes"),
    changeList(argChanges, "Changed arguments"),
    previewChanges
      ? [
          h("p", { class: "small" }, "What the preview now says differently:"),
          changeList(previewChanges, "Changed preview"),
        ]
      : null,
  );
}
