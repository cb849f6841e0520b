/**
 * DOM builders. Every string becomes a text node or an attribute value: the console never parses
 * markup (the page's CSP also requires Trusted Types, so an innerHTML assignment would throw).
 */
export type Child = Node | string | number | null | undefined | false | Child[];
type Handler = (e: Event) => void;
export type Attrs = Record<string, string | number | boolean | Handler | null | undefined>;

function apply(el: Element, attrs: Attrs | undefined): void {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v as Handler);
    else if (k === "class") el.setAttribute("class", String(v));
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

export function append(el: Node, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, ...c);
    else el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  apply(el, attrs);
  append(el, ...children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";
export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs?: Attrs,
  ...children: Child[]
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG_NS, tag);
  apply(el, attrs);
  append(el, ...children);
  return el;
}

export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, ...children);
}

let ids = 0;
/** A unique id for label/aria wiring. */
export const uid = (prefix: string) => `${prefix}-${++ids}`;

/** A status pill: class st-<status>, text the status in words. */
export function badge(status: string): HTMLSpanElement {
  return h("span", { class: `badge st-${status}` }, status.replace(/_/g, " "));
}
