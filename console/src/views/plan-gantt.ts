/**
 * The Gantt a records write will put in the table (the preview's timeline, model/plan-gantt.ts)
 * as a small SVG chart in the decision dialog: one row per task, one column per day, days off
 * shaded, critical tasks marked, milestones as diamonds. Geometry in attributes, colours in
 * styles.css (the CSP allows no inline styles).
 */
import { h, svg } from "../dom.js";
import { planGantt, type PlanGantt } from "../model/plan-gantt.js";

const LABEL_W = 190;
const ROW_H = 20;
const AXIS_H = 20;
const MAX_ROWS = 200;

export function planGanttView(g: PlanGantt, width: number): HTMLElement {
  const bars = g.bars.slice(0, MAX_ROWS);
  // at least 6 px a day, at most 28: a long plan scrolls sideways
  const dayW = Math.min(28, Math.max(6, (width - LABEL_W - 16) / g.days.length));
  const chartW = dayW * g.days.length;
  const height = AXIS_H + bars.length * ROW_H + 2;
  const x = (col: number) => (LABEL_W + col * dayW).toFixed(1);
  const label = (b: (typeof bars)[number]) =>
    `${b.title} (${b.key}): ${b.milestone ? `milestone on ${b.start}` : `${b.start} to ${b.end}${b.days !== null ? `, ${b.days} working days` : ""}`}${b.slack !== null ? `, slack ${b.slack}` : ""}${b.critical ? ", critical" : ""}`;
  return h(
    "div",
    {
      class: "tl-wrap",
      tabindex: 0,
      role: "region",
      "aria-label": "Planned timeline (scrolls)",
      "data-testid": "plan-gantt",
    },
    svg(
      "svg",
      {
        class: "plan-gantt",
        width: LABEL_W + chartW + 8,
        height,
        role: "img",
        "aria-label": `Planned timeline: ${g.bars.length} tasks from ${g.days[0]} to ${g.finish}`,
      },
      g.off.map((i) =>
        svg("rect", {
          class: "pg-off",
          x: x(i),
          y: AXIS_H,
          width: dayW.toFixed(1),
          height: height - AXIS_H,
          "data-day": g.days[i]!,
        }),
      ),
      g.weeks.map((i) =>
        svg(
          "g",
          { class: "tl-tick" },
          svg("line", { x1: x(i), x2: x(i), y1: AXIS_H - 4, y2: height }),
          svg("text", { x: x(i), y: AXIS_H - 7 }, g.days[i]!.slice(5)),
        ),
      ),
      bars.map((b, r) => {
        const y = AXIS_H + r * ROW_H;
        const mark = b.milestone
          ? svg(
              "path",
              {
                class: `pg-milestone${b.critical ? " pg-critical" : ""}`,
                d: `M${x(b.x0)} ${y + 3} l6 7 l-6 7 l-6 -7 z`,
                "data-key": b.key,
              },
              svg("title", {}, label(b)),
            )
          : svg(
              "rect",
              {
                class: `pg-bar${b.critical ? " pg-critical" : ""}`,
                x: x(b.x0),
                y: y + 4,
                width: ((b.x1 - b.x0) * dayW).toFixed(1),
                height: ROW_H - 8,
                rx: 2,
                "data-key": b.key,
                "data-start": b.start,
                "data-end": b.end,
              },
              svg("title", {}, label(b)),
            );
        return svg(
          "g",
          { class: "tl-row" },
          svg(
            "text",
            { x: 6, y: y + ROW_H / 2 + 4, class: "tl-label" },
            b.title.length > 26 ? `${b.title.slice(0, 25)}…` : b.title,
          ),
          mark,
        );
      }),
    ),
    h(
      "ul",
      { class: "legend", "aria-label": "Planned timeline legend" },
      h("li", {}, h("span", { class: "swatch pg-bar" }), "task"),
      h("li", {}, h("span", { class: "swatch pg-bar pg-critical" }), "critical (no slack)"),
      h("li", {}, h("span", { class: "swatch pg-off" }), "day off"),
      h("li", {}, `finish ${g.finish}`),
    ),
    g.bars.length > bars.length ? h("p", { class: "muted" }, `First ${bars.length} of ${g.bars.length} tasks.`) : null,
  );
}

/** The chart of a preview that carries a timeline, else null. */
export function planGanttOf(preview: unknown, width = 820): HTMLElement | null {
  const g = planGantt(preview);
  return g ? planGanttView(g, width) : null;
}
