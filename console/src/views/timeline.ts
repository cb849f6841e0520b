/** The Gantt timeline as SVG: one row per step, bars from buildTimeline (see model/timeline.ts). */
import { h, svg } from "../dom.js";
import { duration } from "../model/format.js";
import { ticks, type Timeline } from "../model/timeline.js";

export const TIMELINE_MAX_LANES = 400;
const LABEL_W = 150;
const ROW_H = 24;
const AXIS_H = 22;

const KIND_TEXT: Record<string, string> = {
  attempt: "attempt",
  backoff: "back-off before retry",
  waiting: "waiting for a decision",
  compensation: "compensation",
  decision: "compensation failed, waiting for an operator",
};

export function timelineView(t: Timeline, now: number, width: number): HTMLElement {
  if (t.start === null) return h("p", { class: "muted" }, "No events yet.");
  const lanes = t.lanes.slice(0, TIMELINE_MAX_LANES);
  const end = Math.max(t.open ? now : (t.end ?? now), t.start + 1);
  const span = end - t.start;
  // room on the right for the last tick's label
  const chartW = Math.max(220, width - LABEL_W - 44);
  const x = (ms: number) => LABEL_W + ((ms - t.start!) / span) * chartW;
  const height = AXIS_H + lanes.length * ROW_H + 4;

  const axis = ticks(span).map((off) =>
    svg(
      "g",
      { class: "tl-tick" },
      svg("line", { x1: x(t.start! + off), x2: x(t.start! + off), y1: AXIS_H - 4, y2: height }),
      svg("text", { x: x(t.start! + off), y: AXIS_H - 8, "text-anchor": "middle" }, duration(off)),
    ),
  );
  const rows = lanes.map((l, i) => {
    const y = AXIS_H + i * ROW_H;
    const bars = l.segments.map((s) => {
      const x0 = x(s.start);
      const x1 = x(s.end ?? end);
      const what = `${KIND_TEXT[s.kind] ?? s.kind}${s.attempt ? ` ${s.attempt}` : ""}`;
      const label = `${l.stepId}: ${what}, ${duration((s.end ?? end) - s.start)}${s.end === null ? " so far" : ""}${s.outcome ? `, ${s.outcome.replace(/_/g, " ")}` : ""}`;
      return svg(
        "rect",
        {
          class: `tl-bar tl-${s.kind}${s.outcome ? ` tl-out-${s.outcome.replace(/[^a-z_]/g, "_")}` : ""}${s.end === null ? " tl-open" : ""}`,
          x: x0.toFixed(1),
          y: y + 5,
          width: Math.max(2, x1 - x0).toFixed(1),
          height: ROW_H - 10,
          rx: 2,
          "data-step": l.stepId,
          "data-kind": s.kind,
          "data-outcome": s.outcome ?? "",
        },
        svg("title", {}, label),
      );
    });
    return svg(
      "g",
      { class: "tl-row" },
      svg("rect", { class: i % 2 ? "tl-stripe odd" : "tl-stripe", x: 0, y, width: LABEL_W + chartW, height: ROW_H }),
      svg(
        "text",
        { x: 6, y: y + ROW_H / 2 + 4, class: "tl-label" },
        l.stepId.length > 20 ? `${l.stepId.slice(0, 19)}…` : l.stepId,
      ),
      bars,
    );
  });
  const note =
    t.lanes.length > lanes.length
      ? h("p", { class: "muted" }, `First ${lanes.length} of ${t.lanes.length} steps.`)
      : null;
  return h(
    "div",
    { class: "tl-wrap", tabindex: 0, role: "region", "aria-label": "Timeline (scrolls)" },
    svg(
      "svg",
      {
        class: "timeline",
        width: LABEL_W + chartW + 32,
        height,
        role: "img",
        "aria-label": `Timeline of ${t.lanes.length} steps over ${duration(span)}`,
      },
      axis,
      rows,
    ),
    h(
      "ul",
      { class: "legend", "aria-label": "Timeline legend" },
      ["attempt", "backoff", "waiting", "compensation", "decision"].map((k) =>
        h("li", {}, h("span", { class: `swatch tl-${k}` }), KIND_TEXT[k] ?? k),
      ),
      h("li", {}, h("span", { class: "swatch tl-out-failed" }), "failed attempt"),
    ),
    note,
  );
}
