/** Renders run values (inputs, outputs, previews, errors): lists of records as tables, the rest as JSON text. */
import { h, type Child } from "../dom.js";
import { pretty } from "../model/format.js";
import { cellText, recordTables, type RecordTable } from "../model/records.js";

const MAX_ROWS = 200;

export function recordTable(t: RecordTable, caption: string): HTMLElement {
  const shown = t.rows.slice(0, MAX_ROWS);
  // a region that may scroll sideways: focusable, so the keyboard can scroll it
  return h(
    "div",
    { class: "table-wrap", tabindex: 0, role: "region", "aria-label": caption },
    h(
      "table",
      { class: "records" },
      h(
        "caption",
        {},
        caption,
        t.rows.length > MAX_ROWS
          ? ` (first ${MAX_ROWS} of ${t.rows.length})`
          : ` (${t.rows.length} ${t.rows.length === 1 ? "row" : "rows"})`,
      ),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", { scope: "col" }, "#"),
          t.columns.map((c) => h("th", { scope: "col" }, c)),
        ),
      ),
      h(
        "tbody",
        {},
        shown.map((r, i) =>
          h(
            "tr",
            {},
            h("td", { class: "num" }, i + 1),
            t.columns.map((c) => h("td", {}, cellText(r[c]))),
          ),
        ),
      ),
    ),
  );
}

export function jsonBlock(v: unknown, label?: string): HTMLElement {
  return h("pre", { class: "json", tabindex: 0, ...(label ? { "aria-label": label } : {}) }, pretty(v));
}

/**
 * A value with every list of records in it shown as a table, and the whole value as JSON (open
 * when there is no table).
 */
export function valueView(v: unknown, name: string): Child {
  if (v === null || v === undefined) return h("p", { class: "muted" }, "none");
  const tables = recordTables(v);
  if (!tables.length) return jsonBlock(v, name);
  return [
    tables.map((t) => recordTable(t, t.path ? `${name}: ${t.path}` : name)),
    h("details", { class: "raw" }, h("summary", {}, `${name} as JSON`), jsonBlock(v, `${name} as JSON`)),
  ];
}
