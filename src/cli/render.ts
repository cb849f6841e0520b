/**
 * Text for people: event lines, the step tree, confirmation blocks, the run list and `show`.
 * Every function returns lines and takes the clock and the width as arguments, so output is
 * the same locally and remotely and can be checked in tests. Run data in them goes through `esc`
 * (src/cli/escape.ts): a goal, a record title or an error message is never terminal control.
 */
import { ganttText, type Timeline } from "./gantt-text.js";
import type { RunEvent } from "../kernel/events.js";
import type { StepStatus } from "../kernel/status.js";
import type { PendingConfirmation } from "../kernel/pending.js";
import type { RunView } from "../kernel/run-view.js";
import { versionChangeLines } from "../kernel/version-notice.js";
import { brief } from "../tools/results.js";
import type { RunSummary } from "../store/run-store.js";
import { esc } from "./escape.js";
import { formatMs, layoutTree, type RunModel, type StepState } from "./model.js";

export interface Style {
  color: boolean;
}

const SGR: Record<string, string> = {
  green: "32",
  red: "31",
  yellow: "33",
  cyan: "36",
  dim: "2",
  bold: "1",
  magenta: "35",
};
export const paint = (st: Style, c: keyof typeof SGR, s: string) => (st.color && s ? `\x1b[${SGR[c]}m${s}\x1b[0m` : s);

const ICON: Record<StepStatus, [string, keyof typeof SGR]> = {
  pending: ["○", "dim"],
  running: ["▶", "cyan"],
  retrying: ["↻", "yellow"],
  waiting_confirmation: ["?", "magenta"],
  completed: ["✔", "green"],
  failed: ["✖", "red"],
  skipped: ["–", "dim"],
  cancelled: ["⊘", "yellow"],
  rolled_back: ["↺", "yellow"],
  rollback_failed: ["✖", "red"],
};

/** Visible width (ANSI colours do not count). */
export const visible = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "").length;
const pad = (s: string, w: number) => s + " ".repeat(Math.max(0, w - visible(s)));

/** Cut a line to `width` visible characters, keeping colour codes balanced. */
export function clip(line: string, width: number): string {
  if (visible(line) <= width) return line;
  let out = "";
  let n = 0;
  for (let i = 0; i < line.length;) {
    const m = /^\x1b\[[0-9;]*m/.exec(line.slice(i));
    if (m) {
      out += m[0];
      i += m[0].length;
      continue;
    }
    if (n >= width - 1) break;
    out += line[i];
    n++;
    i++;
  }
  return `${out}…${line.includes("\x1b[") ? "\x1b[0m" : ""}`;
}

/** One line per event (`#  3 10:02:01.234 step_started  split  attempt 1 · qtable.task.split`): what piped output prints. */
export function formatEvent(e: RunEvent): string {
  const d = e.data;
  const err = d.error as { code?: string; message?: string } | undefined;
  const extra =
    e.type === "step_started"
      ? `attempt ${String(d.attempt)} · ${String(d.skillName)}`
      : e.type === "step_retrying"
        ? `attempt ${String(d.attempt)} failed (${err?.code}), retry in ${formatMs(Number(d.delayMs))}`
        : e.type === "step_failed"
          ? `${err?.code}: ${err?.message}`
          : e.type === "step_completed"
            ? `after ${String(d.attempts)} attempt${d.attempts === 1 ? "" : "s"}${d.markedDone ? " (marked done)" : ""}`
            : e.type === "step_waiting_confirmation"
              ? `${d.inDoubt ? "in doubt" : "confirmation"} · ${String(d.skillName)}`
              : e.type === "step_confirmed"
                ? `${String(d.decision)}${d.comment ? `: ${String(d.comment)}` : ""}`
                : e.type === "step_skipped"
                  ? `because ${String(d.because)} did not complete`
                  : e.type === "step_waiting_for_limit"
                    ? JSON.stringify(d.waitingFor)
                    : e.type === "run_waiting_confirmation"
                      ? `pending: ${(d.pending as string[] | undefined)?.join(", ")}`
                      : e.type === "run_failed"
                        ? `${String(d.status)}${(d.error as { code?: string } | null)?.code ? ` ${(d.error as { code: string }).code}` : ""}`
                        : e.type === "planning_completed"
                          ? `${typeof d.steps === "number" ? d.steps : ((d.plan as { steps?: unknown[] } | undefined)?.steps?.length ?? "the given")} steps${(d.planner as { kind?: string } | undefined)?.kind ? ` by the ${(d.planner as { kind: string }).kind} planner` : ""}`
                          : e.type === "planning_failed"
                            ? `${err?.code ?? ""} ${err?.message ?? ""}`.trim()
                            : "";
  return esc(
    `#${String(e.seq).padStart(3)} ${e.at.slice(11, 23)} ${e.type.padEnd(26)} ${(e.stepId ?? "").padEnd(e.stepId ? 10 : 0)}${extra ? ` ${extra}` : ""}`.trimEnd(),
  );
}

function stepDuration(s: StepState, now: number): string {
  if (s.startedAt === undefined) return "";
  return formatMs((s.finishedAt ?? now) - s.startedAt);
}

/** The run's steps as a tree: icon, id, status, attempt, duration, and what it waits for or why it failed. */
export function treeLines(m: RunModel, o: Style & { now: number; width: number }): string[] {
  const rows = layoutTree(m.list());
  const head = rows.map((r) => `${r.prefix}${ICON[m.steps.get(r.stepId)!.status][0]} ${esc(r.stepId)}`);
  const w = Math.max(0, ...head.map((h) => h.length));
  const skillW = Math.max(0, ...rows.map((r) => esc(m.steps.get(r.stepId)!.skillName).length));
  return rows.map((r) => {
    const s = m.steps.get(r.stepId)!;
    const [icon, c] = ICON[s.status];
    const name = `${r.prefix}${paint(o, c, icon)} ${paint(o, "bold", esc(r.stepId))}`;
    const status = paint(o, c, s.status.replace(/_/g, " "));
    const detail = [
      s.error && (s.status === "failed" || s.status === "rollback_failed") ? `${s.error.code}: ${s.error.message}` : "",
      s.note ?? "",
      s.decision ?? "",
      r.alsoAfter.length ? `after ${r.alsoAfter.join(", ")}` : "",
    ]
      .filter(Boolean)
      .map(esc)
      .join(" · ");
    const line = [
      pad(name, w),
      paint(o, "dim", esc(s.skillName).padEnd(skillW)),
      pad(status, 20),
      (s.attempt > 0 ? `attempt ${s.attempt}` : "").padEnd(10),
      stepDuration(s, o.now).padStart(8),
      detail ? paint(o, "dim", detail) : "",
    ].join("  ");
    return clip(line.trimEnd(), o.width);
  });
}

/** `run 3f2a… · running · 4.2 s · "goal"` */
export function headerLine(m: RunModel, o: Style & { now: number; width: number; startedAt: number }): string {
  const c =
    m.status === "completed"
      ? "green"
      : m.status === "waiting_confirmation"
        ? "magenta"
        : ["failed", "rollback_failed"].includes(m.status)
          ? "red"
          : "cyan";
  const done = m.list().filter((s) => s.status === "completed").length;
  return clip(
    [
      `run ${esc(m.runId)}`,
      paint(o, c, m.status.replace(/_/g, " ")),
      `${done}/${m.steps.size} steps done`,
      formatMs(m.workedMs(o.now, o.startedAt) ?? o.now - o.startedAt),
      m.goal ? paint(o, "dim", `"${esc(m.goal)}"`) : "",
    ]
      .filter(Boolean)
      .join(" · "),
    o.width,
  );
}

/** The records preview of qtable.task.records.create as a table; any other preview as JSON. */
export function previewText(preview: unknown): string {
  const p = preview as {
    table?: { name: string; id: string };
    count?: number;
    records?: Record<string, unknown>[];
    timeline?: Timeline;
    diff?: Record<"created" | "updated" | "unchanged" | "removed", { key: string; values?: Record<string, unknown> }[]>;
  } | null;
  if (!p?.records) return (JSON.stringify(preview, null, 2) ?? "null").split("\n").map(esc).join("\n");
  const cols = ["title", "estimateDays", "start", "end", "dependsOn"].filter((c) =>
    p.records!.some((r) => r[c] !== undefined),
  );
  const cell = (v: unknown) =>
    v === undefined || v === null ? "" : esc(typeof v === "string" ? v : (JSON.stringify(v) ?? String(v)));
  const width = cols.map((c) => Math.min(60, Math.max(c.length, ...p.records!.map((r) => cell(r[c]).length))));
  const line = (vals: string[]) =>
    vals.map((v, i) => (v.length > width[i]! ? `${v.slice(0, width[i]! - 1)}…` : v.padEnd(width[i]!))).join("  ");
  const d = p.diff;
  const n = (k: keyof NonNullable<typeof d>) => d?.[k]?.length ?? 0;
  const where = `in table "${esc(String(p.table?.name))}" (${esc(String(p.table?.id))})`;
  // a re-plan: say what the write does to the table's rows, the removed ones by name
  const replan = d && n("created") !== p.records.length + n("removed");
  return [
    replan
      ? `${esc(String(p.count))} records to write ${where}: ${n("created")} to create, ${n("updated")} to update, ${n("unchanged")} unchanged, ${n("removed")} to mark removed:`
      : `${esc(String(p.count))} records to create ${where}:`,
    "",
    `  ${line(cols)}`,
    `  ${line(width.map((w) => "-".repeat(w)))}`,
    ...p.records.map((r) => `  ${line(cols.map((c) => cell(r[c])))}`),
    ...(n("removed")
      ? [
          "",
          "No longer in the plan (status set to removed):",
          ...d!.removed.map((r) => `  ${cell(r.values?.title ?? r.key)} (${esc(r.key)})`),
        ]
      : []),
    ...(p.timeline ? ["", "Timeline:", ...ganttText(p.timeline).map((l) => `  ${l}`)] : []),
  ].join("\n");
}

/** JSON, cut to `max` lines (a resolved argument may be a whole table). */
function jsonBlock(v: unknown, max = 40, runId = "<runId>"): string[] {
  const lines = JSON.stringify(v, null, 2)?.split("\n").map(esc) ?? ["undefined"];
  return lines.length > max
    ? [...lines.slice(0, max), `… ${lines.length - max} more lines (npx toolchain show ${esc(runId)} --json)`]
    : lines;
}

const KIND_TEXT = {
  confirmation: "waits for confirmation",
  in_doubt: "is in doubt (it was running when its process died): was its effect applied?",
  compensation: "failed to compensate: retry it, skip it, or stop",
} as const;

/** What a person needs to decide: the step, its skill, the preview, the resolved arguments. */
export function confirmationLines(p: PendingConfirmation, st: Style, runId?: string): string[] {
  const kind = p.kind ?? "confirmation";
  const out = [
    paint(st, "bold", `Step "${esc(p.stepId)}" (${esc(p.skillName)}) ${KIND_TEXT[kind] ?? esc(String(kind))}.`),
  ];
  // a deploy while it waited: said first, before the (older) preview it qualifies
  const changed = versionChangeLines(p, (v) => brief(v, 400));
  if (changed.length) out.push(...changed.map((l, i) => (i ? `  ${esc(l)}` : paint(st, "yellow", esc(l)))));
  if (p.preview !== null && p.preview !== undefined)
    out.push(
      "",
      paint(st, "bold", "Preview:"),
      ...previewText(p.preview)
        .split("\n")
        .map((l) => `  ${l}`),
    );
  // with a preview the arguments are the detail: keep them short
  const hasPreview = p.preview !== null && p.preview !== undefined;
  out.push(
    "",
    paint(st, "bold", "Resolved arguments:"),
    ...jsonBlock(p.arguments, hasPreview ? 12 : 40, runId).map((l) => `  ${l}`),
  );
  return out;
}

/** How to decide later, with the same connection flags; `decided`: how many steps were decided in this session. */
export function howToConfirm(view: RunView, connection: string, decided = 0): string[] {
  const flags = connection ? ` ${connection}` : "";
  const waiting = view.pendingConfirmations.map((p) => `"${esc(p.stepId)}"`).join(", ");
  return [
    decided
      ? `Run ${esc(view.runId)} still waits for confirmation of ${waiting} (left waiting). Later:`
      : `Run ${esc(view.runId)} waits for confirmation of ${waiting}; nothing was decided. Later:`,
    ...view.pendingConfirmations.map(
      (p) =>
        `  npx toolchain approve ${esc(view.runId)} ${esc(p.stepId)}${flags}    # or: reject${p.kind === "in_doubt" ? ", or confirm … mark_done" : ""}`,
    ),
    `  npx toolchain show ${esc(view.runId)}${flags}`,
  ];
}

/** The closing line of a run command. */
/** The closing line; `elapsedMs`: the run's own time, without its waits for a person (RunModel.workedMs). */
export function summaryLine(view: RunView, st: Style, elapsedMs?: number): string {
  const counts = new Map<string, number>();
  for (const s of view.steps) counts.set(s.status, (counts.get(s.status) ?? 0) + 1);
  const c = view.status === "completed" ? "green" : view.status === "waiting_confirmation" ? "magenta" : "red";
  const parts = [...counts].map(([k, n]) => `${n} ${k.replace(/_/g, " ")}`).join(", ");
  return `${paint(st, c, `run ${esc(view.runId)} ${view.status.replace(/_/g, " ")}`)}${elapsedMs !== undefined ? ` in ${formatMs(elapsedMs)}` : ""} · ${parts || "no steps"}${view.error ? ` · ${esc(`${view.error.code}: ${view.error.message}`)}` : ""}`;
}

const localTime = (iso: string | null) => (iso ? iso.replace("T", " ").slice(0, 19) : "");

export function runsTable(runs: RunSummary[], st: Style): string[] {
  if (!runs.length) return ["no runs"];
  const rows = runs.map((r) =>
    [
      r.runId,
      r.status.replace(/_/g, " "),
      String(r.stepCount),
      localTime(r.createdAt),
      r.finishedAt ? formatMs(Date.parse(r.finishedAt) - Date.parse(r.createdAt)) : "",
      r.goal ?? r.planId ?? "",
    ].map(esc),
  );
  const head = ["RUN", "STATUS", "STEPS", "CREATED (UTC)", "TOOK", "GOAL"];
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) =>
    r
      .map((v, i) => (i === r.length - 1 ? v : v.padEnd(w[i]!)))
      .join("  ")
      .trimEnd();
  return [paint(st, "bold", line(head)), ...rows.map(line)];
}

interface Span {
  from: number;
  to: number;
  kind: "run" | "wait";
}

/** Each step's attempts (█) and confirmation waits (░) on one time axis, from the run's events. */
export function timelineLines(view: RunView, events: RunEvent[], o: { width: number }): string[] {
  if (!events.length) return ["(no events)"];
  const t0 = Date.parse(events[0]!.at);
  const t1 = Math.max(t0 + 1, ...events.map((e) => Date.parse(e.at)));
  const spans = new Map<string, Span[]>();
  const open = new Map<string, { at: number; kind: Span["kind"] }>();
  const close = (id: string, at: number) => {
    const o2 = open.get(id);
    if (!o2) return;
    spans.set(id, [...(spans.get(id) ?? []), { from: o2.at, to: at, kind: o2.kind }]);
    open.delete(id);
  };
  for (const e of events) {
    if (!e.stepId) continue;
    const at = Date.parse(e.at);
    if (e.type === "step_started" || e.type === "step_waiting_confirmation") {
      close(e.stepId, at);
      open.set(e.stepId, { at, kind: e.type === "step_started" ? "run" : "wait" });
    } else if (["step_completed", "step_failed", "step_retrying", "step_cancelled", "step_confirmed"].includes(e.type))
      close(e.stepId, at);
  }
  for (const id of [...open.keys()]) close(id, t1);
  const idW = Math.max(4, ...view.steps.map((s) => esc(s.stepId).length));
  const barW = Math.max(10, Math.min(60, o.width - idW - 24));
  const col = (t: number) => Math.min(barW - 1, Math.floor(((t - t0) / (t1 - t0)) * barW));
  const out = [`${"".padEnd(idW)}  0${formatMs(t1 - t0).padStart(barW - 1)}   █ running  ░ waiting for confirmation`];
  for (const s of view.steps) {
    const bar = Array.from({ length: barW }, () => "·");
    const mine = spans.get(s.stepId) ?? [];
    for (const sp of mine)
      for (let c = col(sp.from); c <= col(Math.max(sp.from, sp.to - 1)); c++)
        bar[c] = sp.kind === "run" ? "█" : bar[c] === "█" ? "█" : "░";
    const ran = mine.filter((x) => x.kind === "run");
    const label = ran.length
      ? `${formatMs(ran[0]!.from - t0)} → ${formatMs(ran[ran.length - 1]!.to - t0)}`
      : s.status.replace(/_/g, " ");
    out.push(`${esc(s.stepId).padEnd(idW)}  ${bar.join("")}  ${label}`);
  }
  return out;
}

/** `toolchain show`: the run, its steps as a tree, the timeline, the events. */
export function showLines(
  view: RunView,
  events: RunEvent[],
  m: RunModel,
  o: Style & { width: number; now: number },
): string[] {
  const created = Date.parse(view.createdAt);
  const last = events.length ? Date.parse(events[events.length - 1]!.at) : o.now;
  const lines = [
    headerLine(m, {
      ...o,
      now: last,
      startedAt: Number.isFinite(created) ? created : events[0] ? Date.parse(events[0].at) : last,
    }),
    paint(
      o,
      "dim",
      `created ${localTime(view.createdAt)} UTC · updated ${localTime(view.updatedAt)} UTC${view.planning ? ` · planned by the ${esc(view.planning.kind)} planner${view.planning.model ? ` (${esc(view.planning.model)})` : ""}` : ""}`,
    ),
  ];
  if (view.error) lines.push(paint(o, "red", esc(`error ${view.error.code}: ${view.error.message}`)));
  lines.push("", paint(o, "bold", "Steps"), ...treeLines(m, { ...o, now: last }).map((l) => `  ${l}`));
  for (const p of view.pendingConfirmations) lines.push("", ...confirmationLines(p, o, view.runId));
  lines.push("", paint(o, "bold", "Timeline"), ...timelineLines(view, events, o).map((l) => `  ${l}`));
  lines.push("", paint(o, "bold", `Events (${events.length})`), ...events.map((e) => `  ${formatEvent(e)}`));
  return lines;
}
