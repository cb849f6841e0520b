/**
 * The run timeline (Gantt) from the event log: per step, bars for each attempt, the back-off
 * before a retry, the waits for a human, and its compensation. Pure: events in, lanes out.
 *
 * Compensations run one at a time, and no event marks the start of one, so a compensation bar
 * starts at the previous rollback event (rollback_started, or the previous compensation's end).
 */
import type { RunEvent } from "./types.js";

export type SegmentKind = "attempt" | "backoff" | "waiting" | "compensation" | "decision";

export interface Segment {
  kind: SegmentKind;
  /** ms since the epoch */
  start: number;
  /** null while it is still going on */
  end: number | null;
  /** How it ended: completed, failed, retried, cancelled, interrupted, approved, rejected, rolled_back, rollback_failed… */
  outcome?: string;
  attempt?: number;
}

export interface Lane {
  stepId: string;
  segments: Segment[];
}

export interface Timeline {
  /** First and last event times (ms); null without events. */
  start: number | null;
  end: number | null;
  lanes: Lane[];
  /** Some segment has not ended. */
  open: boolean;
}

type Ev = Pick<RunEvent, "seq" | "type" | "stepId" | "at" | "data">;

export function buildTimeline(stepIds: readonly string[], events: readonly Ev[]): Timeline {
  const lanes = new Map<string, Lane>(stepIds.map((id) => [id, { stepId: id, segments: [] }]));
  const lane = (id: string): Lane => {
    let l = lanes.get(id);
    if (!l) lanes.set(id, (l = { stepId: id, segments: [] }));
    return l;
  };
  const close = (l: Lane, at: number, outcome: string, kind?: SegmentKind) => {
    for (const s of l.segments)
      if (s.end === null && (kind === undefined || s.kind === kind)) {
        s.end = Math.max(at, s.start);
        s.outcome ??= outcome;
      }
  };
  let start: number | null = null;
  let end: number | null = null;
  let rollbackCursor: number | null = null;

  for (const e of [...events].sort((a, b) => a.seq - b.seq)) {
    const at = Date.parse(e.at);
    if (Number.isNaN(at)) continue;
    start = start === null ? at : Math.min(start, at);
    end = end === null ? at : Math.max(end, at);
    const d = e.data ?? {};
    if (e.type === "rollback_started") rollbackCursor = at;
    if (e.stepId === undefined) continue;
    const l = lane(e.stepId);
    switch (e.type) {
      case "step_started":
        close(l, at, "retried", "backoff");
        close(l, at, "approved", "waiting");
        l.segments.push({
          kind: "attempt",
          start: at,
          end: null,
          attempt: typeof d.attempt === "number" ? d.attempt : undefined,
        });
        break;
      case "step_retrying":
        close(l, at, "retried", "attempt");
        l.segments.push({ kind: "backoff", start: at, end: null });
        break;
      case "step_waiting_confirmation":
        // in doubt: the attempt that was running when its process died
        close(l, at, "interrupted", "attempt");
        l.segments.push({ kind: "waiting", start: at, end: null });
        break;
      case "step_confirmed": {
        const decision = typeof d.decision === "string" ? d.decision : "decided";
        const outcome =
          decision === "approve"
            ? "approved"
            : decision === "reject"
              ? "rejected"
              : decision === "mark_done"
                ? "marked done"
                : decision === "skip"
                  ? "skipped"
                  : decision;
        if (d.kind === "compensation") {
          close(l, at, outcome, "decision");
          rollbackCursor = at;
        } else close(l, at, outcome, "waiting");
        break;
      }
      case "step_completed":
      case "step_failed":
      case "step_cancelled":
      case "step_skipped": {
        const outcome = e.type.slice("step_".length);
        close(l, at, outcome);
        break;
      }
      case "step_rolled_back":
      case "step_rollback_failed": {
        const outcome = e.type === "step_rolled_back" ? "rolled_back" : "rollback_failed";
        const from = rollbackCursor ?? at;
        l.segments.push({ kind: "compensation", start: Math.min(from, at), end: at, outcome });
        rollbackCursor = at;
        break;
      }
      case "rollback_waiting_decision":
        l.segments.push({ kind: "decision", start: at, end: null });
        break;
      default:
        break;
    }
  }
  const all = [...lanes.values()];
  return { start, end, lanes: all, open: all.some((l) => l.segments.some((s) => s.end === null)) };
}

/** Tick positions (ms offsets from 0) for an axis `span` ms long: 1/2/5 × 10^n steps, about `target` of them. */
export function ticks(span: number, target = 6): number[] {
  if (!(span > 0)) return [0];
  const raw = span / target;
  const pow = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw) ?? 10 * pow;
  const out: number[] = [];
  for (let t = 0; t <= span + 1e-9; t += step) out.push(t);
  return out;
}

/**
 * How long a step worked: its attempts and the back-offs between them, not the time it waited
 * for a person (or for a rollback decision). Open segments count up to `now`.
 */
export function activeMs(lane: Lane | undefined, now: number): number | null {
  if (!lane) return null;
  const work = lane.segments.filter((s) => s.kind === "attempt" || s.kind === "backoff");
  if (!work.length) return null;
  return work.reduce((sum, s) => sum + Math.max(0, (s.end ?? now) - s.start), 0);
}

/** When each step began its current wait for a person (the last wait event per step), ms since the epoch. */
export function waitingSince(events: readonly Pick<RunEvent, "seq" | "type" | "stepId" | "at">[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const e of [...events].sort((a, b) => a.seq - b.seq)) {
    if (!e.stepId) continue;
    if (e.type === "step_waiting_confirmation" || e.type === "rollback_waiting_decision") {
      const at = Date.parse(e.at);
      if (!Number.isNaN(at)) out.set(e.stepId, at);
    } else if (e.type === "step_confirmed" || e.type === "step_started") out.delete(e.stepId);
  }
  return out;
}
