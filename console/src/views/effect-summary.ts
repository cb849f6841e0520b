/**
 * The summary a decision dialog opens at: the effect (what, to what, how many, through which
 * channel, whether it can be undone) or what the wait is about, and the approvals given so far.
 */
import { h, type Child } from "../dom.js";
import { actorName } from "../model/decisions.js";
import { effectSummary, REVERSIBILITY_TEXT } from "../model/effect.js";
import { age } from "../model/format.js";
import type { ApprovalState, PendingDecision, PendingKind, SkillInfo } from "../model/types.js";

/** The effect of the step as it would run with `args` and the preview shown. */
export function effectView(
  kind: PendingKind,
  pending: PendingDecision,
  skill: SkillInfo | undefined,
  preview: unknown,
  args: unknown,
): Child {
  const eff = effectSummary(pending.skillName, skill, preview, args);
  return kind === "confirmation"
    ? [
        h("p", { class: "effect-sentence" }, h("strong", {}, eff.sentence)),
        h(
          "dl",
          { class: "facts effect" },
          h("dt", {}, "Skill"),
          h("dd", {}, h("code", {}, pending.skillName), pending.fallback ? " (fallback)" : ""),
          eff.target
            ? [
                h("dt", {}, "Target"),
                h(
                  "dd",
                  { "data-testid": "effect-target" },
                  eff.target.name ? `${eff.target.name} ` : "",
                  eff.target.id ? h("code", {}, eff.target.id) : null,
                ),
              ]
            : null,
          eff.count !== null
            ? [h("dt", {}, "Records"), h("dd", { "data-testid": "effect-count" }, String(eff.count))]
            : null,
          eff.channel ? [h("dt", {}, "Channel"), h("dd", {}, eff.channel)] : null,
          h("dt", {}, "Undo"),
          h(
            "dd",
            {},
            h(
              "span",
              { class: `rev rev-${eff.reversibility}`, "data-testid": "effect-reversibility" },
              REVERSIBILITY_TEXT[eff.reversibility],
            ),
          ),
        ),
      ]
    : h(
        "p",
        { class: "effect-sentence" },
        kind === "in_doubt"
          ? "The process running this step died during its effect; the runtime cannot tell whether it happened. Retry it, mark it done (optionally with its output), or fail it."
          : "Strict rollback stopped because this step's compensation failed for good. Retry the compensation, skip it (leave the step undone and continue), or stop the rollback.",
      );
}

export function approvalsView(a: ApprovalState | undefined): HTMLElement | null {
  if (!a) return null;
  const approvals = a.given.filter((g) => g.decision === "approve");
  const left = Math.max(0, a.required - approvals.length);
  return h(
    "div",
    { class: "approvals", "data-testid": "approvals" },
    h(
      "p",
      {},
      h("strong", {}, `${approvals.length} of ${a.required} approval${a.required === 1 ? "" : "s"}`),
      left ? ` · ${left} more needed` : "",
      " · ",
      a.youMayDecide ? "you may decide" : "you may not decide this step",
    ),
    a.given.length
      ? h(
          "ul",
          {},
          a.given.map((g) =>
            h(
              "li",
              {},
              `${g.decision === "approve" ? "Approved" : g.decision} by ${g.by ? actorName(g.by) : "someone"}`,
              g.via ? ` via ${g.via}` : "",
              g.at ? ` ${age(Date.now() - Date.parse(g.at))} ago` : "",
              g.comment ? `: “${g.comment}”` : "",
            ),
          ),
        )
      : null,
  );
}
