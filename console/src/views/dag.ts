/**
 * The plan's DAG, laid out by dagre (left to right) and drawn as SVG. Layout happens once per
 * plan; status changes only swap classes. Nodes are focusable buttons.
 */
import dagre from "@dagrejs/dagre";
import { svg, h } from "../dom.js";
import { humanStatus } from "../model/format.js";

export const DAG_MAX_STEPS = 400;
const W = 200;
const H = 62;
/** Short words for the node's third line (the step list and the legend use the full status). */
const SHORT: Record<string, string> = { waiting_confirmation: "awaiting decision", rollback_failed: "rollback failed" };
const shortStatus = (st: string) => SHORT[st] ?? humanStatus(st);

export interface DagView {
  el: HTMLElement;
  setStatus(stepId: string, status: string): void;
}

const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

export function dagView(
  nodes: readonly { id: string; skillName: string }[],
  edges: readonly { from: string; to: string }[],
  onSelect: (stepId: string) => void,
): DagView {
  if (nodes.length > DAG_MAX_STEPS) {
    return {
      el: h(
        "p",
        { class: "muted" },
        `The plan has ${nodes.length} steps: too many to draw (limit ${DAG_MAX_STEPS}). See the steps below.`,
      ),
      setStatus: () => undefined,
    };
  }
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: 18, ranksep: 56, marginx: 12, marginy: 12 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of nodes) g.setNode(n.id, { width: W, height: H });
  for (const e of edges) g.setEdge(e.from, e.to);
  dagre.layout(g);
  const gw = Math.ceil(g.graph().width ?? W);
  const gh = Math.ceil(g.graph().height ?? H);

  const arrow = svg(
    "marker",
    {
      id: "dag-arrow",
      viewBox: "0 0 10 10",
      refX: 9,
      refY: 5,
      markerWidth: 7,
      markerHeight: 7,
      orient: "auto-start-reverse",
    },
    svg("path", { d: "M0,0 L10,5 L0,10 z", class: "dag-arrowhead" }),
  );
  const edgeEls = edges.map((e) => {
    const pts: { x: number; y: number }[] =
      (g.edge(e.from, e.to) as { points?: { x: number; y: number }[] } | undefined)?.points ?? [];
    const d = pts.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");
    return svg("path", { d, class: "dag-edge", "marker-end": "url(#dag-arrow)" });
  });
  const labels = new Map<
    string,
    { g: SVGGElement; status: SVGTextElement; title: SVGTitleElement; skill: string; shown: string }
  >();
  const nodeEls = nodes.map((n) => {
    const p = g.node(n.id);
    const x = p.x - W / 2;
    const y = p.y - H / 2;
    const status = svg("text", { x: x + 10, y: y + 53, class: "dag-status" }, "pending");
    const title = svg("title", {}, `${n.id} (${n.skillName}): pending`);
    const idText = cut(n.id, 24);
    const skillText = cut(n.skillName, 28);
    const el = svg(
      "g",
      {
        class: "dag-node st-pending",
        tabindex: 0,
        role: "button",
        "data-step": n.id,
        // the name starts with the words shown (label in name); the title adds the full names
        "aria-label": `${idText} ${skillText} pending`,
        onclick: () => onSelect(n.id),
        onkeydown: (ev: Event) => {
          const k = (ev as KeyboardEvent).key;
          if (k === "Enter" || k === " ") {
            ev.preventDefault();
            onSelect(n.id);
          }
        },
      },
      title,
      svg("rect", { x, y, width: W, height: H, rx: 7 }),
      svg("text", { x: x + 10, y: y + 19, class: "dag-id" }, idText),
      svg("text", { x: x + 10, y: y + 36, class: "dag-skill" }, skillText),
      status,
    );
    labels.set(n.id, { g: el, status, title, skill: n.skillName, shown: `${idText} ${skillText}` });
    return el;
  });
  const root = svg(
    "svg",
    { class: "dag", width: gw, height: gh, viewBox: `0 0 ${gw} ${gh}`, role: "group", "aria-label": "Plan graph" },
    svg("defs", {}, arrow),
    edgeEls,
    nodeEls,
  );
  return {
    el: h("div", { class: "dag-wrap" }, root),
    setStatus(stepId, st) {
      const l = labels.get(stepId);
      if (!l) return;
      l.g.setAttribute("class", `dag-node st-${st}`);
      l.g.setAttribute("data-status", st);
      l.g.setAttribute("aria-label", `${l.shown} ${shortStatus(st)}`);
      l.status.textContent = shortStatus(st);
      l.title.textContent = `${stepId} (${l.skill}): ${humanStatus(st)}`;
    },
  };
}
