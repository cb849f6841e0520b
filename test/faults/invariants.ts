/**
 * What must hold after a crash-point kill and recovery, from the final process's report (the
 * database read back). Pure; every message names the kill so a failure can be replayed with
 * TOOLCHAIN_FAULT=<point:n>.
 */
import type { Shape } from "../fixtures/fault-shapes.js";

export interface Report {
  status: string;
  steps: { stepId: string; status: string; attempts: number; rollback: { status: string } | null }[];
  pending: unknown[];
  /** `backfilled`: written from the checkpoint when a drive ended (a crash lost it), after the live ones. */
  events: { seq: string | number; type: string; stepId: string | null; key: string; backfilled?: boolean }[];
  effects: { key: string; step: string; kind: string; pid: number }[];
  undos: { key: string; step: string; ok: boolean; pid: number }[];
  decisions: { stepId: string; round: number }[];
  row?: { status: string; leaseOwner: string | null };
  stepRows?: { stepId: string; status: string; attempts: number }[];
  heldLimits?: unknown[];
  waitingLimits?: unknown[];
  /** A QTable shape's writes by idempotency key and the records left in the table. */
  qtable?: { writes: { key: string; records: number; undone: boolean }[]; records: number };
  pre: { completed: string[]; undone?: string[]; marked?: string[] } | null;
  pid: number;
}

export interface KillContext {
  /** Where each killed process died (`point:n`, or "recovery" for a killed recovery). */
  killedAt: string[];
  /** The snapshots each recovering process took of what was durable when its predecessor died. */
  pres: NonNullable<Report["pre"]>[];
}

/** The step a compensation's "done" marker (graphs/compensation/compensate.ts: `<compensation id>#compensated`) belongs to. */
export const markerOf = (intentKey: string) =>
  intentKey
    .replace(/#compensated$/, "")
    .split(":")
    .at(-1)!;

const TERMINAL_EVENTS = new Set(["run_completed", "run_failed"]);

/** `clean`: the same shape's clean run (per-step status and attempts are compared with it). */
export function check(shape: Shape, runId: string, r: Report, ctx: KillContext, clean?: Report): string[] {
  const bad: string[] = [];
  const where = ctx.killedAt.length ? ` (killed at ${ctx.killedAt.join(" then ")})` : "";
  const kills = ctx.killedAt.length;
  if (r.status !== shape.expected) bad.push(`status ${r.status}, expected ${shape.expected}${where}`);
  if (r.pending.length) bad.push(`still pending: ${JSON.stringify(r.pending)}${where}`);

  // events: gapless, unique keys, one terminal run event and nothing after it, causes before effects
  const seqs = r.events.map((e) => Number(e.seq));
  if (seqs.some((s, i) => s !== i + 1)) bad.push(`event seq not gapless: ${seqs.join(",")}${where}`);
  const keys = r.events.map((e) => e.key);
  if (new Set(keys).size !== keys.length) bad.push(`duplicate event keys${where}`);
  const types = r.events.map((e) => e.type);
  // a strict rollback waiting for its operator ends the run (run_failed) until the operator answers:
  // after a terminal run event only the rollback goes on, no step runs again
  const terminalAt = types.findIndex((t) => TERMINAL_EVENTS.has(t));
  // the run's end is its last live event, or, when a kill landed after the checkpoint's last write
  // and before the last event batch, its terminal event written back from the checkpoint (backfilled)
  const ENDS = ["run_completed", "run_failed", "rollback_completed"];
  const lastLive = r.events.filter((e) => !e.backfilled).at(-1)?.type;
  const last = r.events.at(-1);
  const endsBackfilled = Boolean(last?.backfilled && ENDS.includes(last.type));
  if (terminalAt < 0 || (!ENDS.includes(lastLive ?? "") && !endsBackfilled))
    bad.push(`the run's live events do not end it: ${types.join(",")}${where}`);
  const rerun = r.events
    .slice(terminalAt + 1)
    .filter((e) => !e.backfilled && ["step_started", "step_completed", "step_fallback_started"].includes(e.type));
  if (terminalAt >= 0 && rerun.length) bad.push(`steps ran after the run ended: ${types.join(",")}${where}`);
  // order among the events written live (backfilled ones come after them by construction)
  const live = r.events.filter((e) => !e.backfilled);
  const firstOf = (type: string, step?: string) =>
    live.findIndex((e) => e.type === type && (step === undefined || e.stepId === step));
  for (const s of new Set(live.map((e) => e.stepId).filter((x): x is string => !!x))) {
    const done = firstOf("step_completed", s);
    const started = Math.min(
      ...["step_started", "step_fallback_started"].map((t) => firstOf(t, s)).filter((i) => i >= 0),
    );
    if (done >= 0 && !(started < done)) bad.push(`step ${s} completed before it started: ${types.join(",")}${where}`);
    const undone = firstOf("step_rolled_back", s);
    if (undone >= 0 && !(firstOf("rollback_started") < undone))
      bad.push(`step ${s} rolled back before the rollback started${where}`);
  }

  // effects: non-idempotent exactly once, never-run steps never, idempotent at most once per process
  for (const step of shape.nonIdempotent) {
    const n = r.effects.filter((e) => e.kind === "write" && e.step === step).length;
    if (n !== 1) bad.push(`non-idempotent step ${step}: ${n} effects${where}`);
  }
  for (const step of shape.never ?? []) {
    const n = r.effects.filter((e) => e.step === step).length;
    if (n) bad.push(`step ${step} should never run: ${n} executions${where}`);
  }
  for (const step of new Set(r.effects.filter((e) => e.kind === "mark").map((e) => e.step))) {
    const runs = r.effects.filter((e) => e.kind === "mark" && e.step === step);
    if (runs.length > kills + 1)
      bad.push(`idempotent step ${step} ran ${runs.length} times in ${kills + 1} processes${where}`);
    if (new Set(runs.map((e) => e.pid)).size !== runs.length)
      bad.push(`idempotent step ${step} ran twice in one process${where}`);
  }
  // a step whose completion was durable (stored event) before a kill never executes after it
  for (const pre of ctx.pres)
    for (const step of pre.completed) {
      const again = r.effects.filter((e) => e.step === step && e.pid === r.pid);
      if (again.length) bad.push(`step ${step} completed before the kill and executed again${where}`);
    }

  // compensations (README, Durability): each compensated step exactly once; twice only when a kill
  // landed between that compensation's end (its effect row) and its "done" marker
  // (each recovering process's snapshot says whether its predecessor died in that window)
  const windows = (s: string) =>
    ctx.pres.filter((p) => p.undone?.includes(s) && !p.marked?.some((m) => markerOf(m) === s)).length;
  for (const s of new Set([...(shape.compensated ?? []), ...r.undos.filter((u) => u.ok).map((u) => u.step)])) {
    const ok = r.undos.filter((u) => u.step === s && u.ok).length;
    const allowed = shape.compensated?.includes(s) ? [1, 1 + windows(s)] : [0];
    if (!allowed.includes(ok))
      bad.push(`compensation of ${s} succeeded ${ok} times, expected ${[...new Set(allowed)].join(" or ")}${where}`);
  }

  // QTable writes: one per step by its idempotency key, with records; undone (records gone) only when the shape rolls back
  if (shape.qtable) {
    const w = r.qtable?.writes ?? [];
    const want = shape.qtable.writes.map((s) => `${runId}:${s}`);
    if (JSON.stringify(w.map((x) => x.key)) !== JSON.stringify(want))
      bad.push(`QTable writes ${w.map((x) => x.key).join(",")}, expected ${want.join(",")}${where}`);
    if (w.some((x) => x.records < 1)) bad.push(`a QTable write without records${where}`);
    if (w.some((x) => x.undone !== shape.qtable!.undone))
      bad.push(`QTable writes undone ${w.map((x) => x.undone).join(",")}, expected ${shape.qtable.undone}${where}`);
    const left = shape.qtable.undone ? 0 : w.reduce((n, x) => n + x.records, 0);
    if (r.qtable?.records !== left) bad.push(`${r.qtable?.records} QTable records left, expected ${left}${where}`);
    if (
      clean?.qtable &&
      r.qtable &&
      JSON.stringify(w.map((x) => x.records)) !== JSON.stringify(clean.qtable.writes.map((x) => x.records))
    )
      bad.push(
        `QTable write sizes ${w.map((x) => x.records)}, clean run ${clean.qtable.writes.map((x) => x.records)}${where}`,
      );
  }

  // decisions: each recorded one applied exactly once
  const confirmed = r.events
    .filter((e) => e.type === "step_confirmed")
    .map((e) => `${e.stepId}:${e.key.split(":").at(-1)}`)
    .sort();
  const recorded = r.decisions.map((d) => `${d.stepId}:${d.round}`).sort();
  if (JSON.stringify(confirmed) !== JSON.stringify(recorded))
    bad.push(`decisions recorded ${recorded.join(",")} but applied ${confirmed.join(",")}${where}`);

  for (const step of shape.asked ?? [])
    if (!r.decisions.some((d) => d.stepId === step)) bad.push(`step ${step} ran without a decision${where}`);

  // per-step status as in the clean run; attempts: at most one more per kill
  for (const s of r.steps) {
    const c = clean?.steps.find((x) => x.stepId === s.stepId);
    if (!c) continue;
    if (s.status !== c.status) bad.push(`step ${s.stepId} ${s.status}, clean run: ${c.status}${where}`);
    // (a step cancelled while it ran may have its attempt lost with the process that ran it)
    const least = c.status === "cancelled" ? 0 : c.attempts;
    if (s.attempts < least || s.attempts > c.attempts + kills)
      bad.push(`step ${s.stepId} ${s.attempts} attempts, clean run ${c.attempts}, ${kills} kills${where}`);
    if ((s.rollback?.status ?? null) !== (c.rollback?.status ?? null))
      bad.push(`step ${s.stepId} rollback ${s.rollback?.status}, clean run: ${c.rollback?.status}${where}`);
  }

  // the run row and step rows agree with the checkpoint's view; nothing held
  if (r.row && r.row.status !== r.status) bad.push(`run row ${r.row.status}, checkpoint ${r.status}${where}`);
  if (r.row?.leaseOwner) bad.push(`lease still held by ${r.row.leaseOwner}${where}`);
  for (const row of r.stepRows ?? []) {
    const v = r.steps.find((s) => s.stepId === row.stepId);
    if (v && v.status !== row.status) bad.push(`step row ${row.stepId} ${row.status}, checkpoint ${v.status}${where}`);
  }
  if (r.heldLimits?.length) bad.push(`limits still held: ${JSON.stringify(r.heldLimits)}${where}`);
  if (r.waitingLimits?.length) bad.push(`limit waiters left: ${JSON.stringify(r.waitingLimits)}${where}`);
  return bad;
}
