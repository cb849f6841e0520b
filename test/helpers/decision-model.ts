/**
 * The model behind test/decisions.model.test.ts: four kinds of run a user meets, what each waits
 * for, which decisions are valid there, and what the run must look like once a decision (or a
 * cancel) is applied: its status, each step's effect count and compensation count, exactly.
 *
 * - approvals: two steps that need confirmation (p, q) and r after p, whose first attempt is
 *   refused before any effect (a retry); reject fails the step (r is skipped).
 * - fallback: w, then f fails and its fallback skill requires confirmation (the runtime asks
 *   before running it, round 2).
 * - strict: strict rollback whose compensation of `bad` fails its first round: the operator
 *   retries (approve), skips, or stops (reject; a cancel stops too).
 * - doubt: a step whose process died mid-effect (the effect happened once); another process takes
 *   the run over after the lease expired and asks: mark_done, approve (run it again) or reject.
 */
const fixed1 = { maxAttempts: 2, backoff: { kind: "fixed", initialMs: 1 } };

export const KINDS = ["approvals", "fallback", "strict", "doubt"] as const;
export type Kind = (typeof KINDS)[number];
export type Choice = "approve" | "reject" | "skip" | "mark_done";
export type WaitKind = "confirmation" | "compensation" | "in_doubt";

export const PLANS: Record<Kind, unknown> = {
  approvals: {
    onFailure: "skip_dependents",
    steps: [
      { stepId: "p", skillName: "m.write", arguments: { label: "p" }, requireConfirmation: true },
      { stepId: "q", skillName: "m.write", arguments: { label: "q" }, requireConfirmation: true },
      {
        stepId: "r",
        skillName: "m.write",
        dependsOn: ["p"],
        arguments: { label: "r", failFirst: true },
        retry: fixed1,
      },
    ],
  },
  fallback: {
    steps: [
      { stepId: "w", skillName: "m.write", arguments: { label: "w" } },
      {
        stepId: "f",
        skillName: "core.fail",
        dependsOn: ["w"],
        retry: { maxAttempts: 1 },
        fallback: { skillName: "m.asks", arguments: { label: "fb" } },
      },
    ],
  },
  strict: {
    onFailure: "fail_fast",
    rollbackMode: "strict",
    steps: [
      { stepId: "w1", skillName: "m.write", arguments: { label: "w1" } },
      { stepId: "bad", skillName: "m.brittle", dependsOn: ["w1"], arguments: { label: "bad" }, retry: fixed1 },
      { stepId: "boom", skillName: "core.fail", dependsOn: ["bad"], retry: { maxAttempts: 1 } },
    ],
  },
  doubt: { steps: [{ stepId: "s", skillName: "m.write", arguments: { label: "s", hang: true } }] },
};

export const STEPS: Record<Kind, string[]> = {
  approvals: ["p", "q", "r"],
  fallback: ["w", "f"],
  strict: ["w1", "bad", "boom"],
  doubt: ["s"],
};

export interface Wait {
  stepId: string;
  round: number;
  kind: WaitKind;
}

export const VALID: Record<WaitKind, Choice[]> = {
  confirmation: ["approve", "reject"],
  compensation: ["approve", "reject", "skip"],
  in_doubt: ["mark_done", "approve", "reject"],
};

export interface RunModel {
  kind: Kind;
  runId: string;
  decided: Record<string, Choice>;
  cancelled: boolean;
  /** A cancel raced a decision: which of the two landed first is not known, only the invariants. */
  raced: boolean;
}

const INITIAL_WAITS: Record<Kind, Wait[]> = {
  approvals: [
    { stepId: "p", round: 0, kind: "confirmation" },
    { stepId: "q", round: 0, kind: "confirmation" },
  ],
  fallback: [{ stepId: "f", round: 2, kind: "confirmation" }],
  strict: [{ stepId: "bad", round: 102, kind: "compensation" }],
  doubt: [{ stepId: "s", round: 1, kind: "in_doubt" }],
};

/** The waits the model says are open now. */
export function waits(m: RunModel): Wait[] {
  if (m.cancelled) return [];
  return INITIAL_WAITS[m.kind].filter((w) => m.decided[w.stepId] === undefined);
}

export interface Expected {
  status: string;
  /** Per step: how often its effect (own skill or fallback skill) happened. */
  effects: Record<string, number>;
  compensations: Record<string, number>;
}

/** What the run must look like now (not for `raced` runs: see the invariants there). */
export function expected(m: RunModel): Expected {
  const d = m.decided;
  const open = waits(m).length > 0;
  switch (m.kind) {
    case "approvals": {
      const p = d.p === "approve" ? 1 : 0;
      const effects = { p, q: d.q === "approve" ? 1 : 0, r: p };
      const status = m.cancelled
        ? "cancelled"
        : open
          ? "waiting_confirmation"
          : d.p === "reject" || d.q === "reject"
            ? "failed"
            : "completed";
      return { status, effects, compensations: m.cancelled ? { ...effects } : { p: 0, q: 0, r: 0 } };
    }
    case "fallback": {
      const effects = { w: 1, f: d.f === "approve" ? 1 : 0 };
      const status = m.cancelled
        ? "cancelled"
        : open
          ? "waiting_confirmation"
          : d.f === "approve"
            ? "completed"
            : "failed";
      return { status, effects, compensations: { w: m.cancelled ? 1 : 0, f: 0 } };
    }
    case "strict": {
      // a cancel of a run waiting on its rollback stops the rollback, like reject
      const stop = m.cancelled || d.bad === "reject";
      const status = open ? "rollback_failed" : d.bad === "approve" ? "rolled_back" : "rollback_failed";
      return {
        status,
        effects: { w1: 1, bad: 1, boom: 0 },
        compensations: { w1: !open && !stop ? 1 : 0, bad: d.bad === "approve" ? 1 : 0, boom: 0 },
      };
    }
    case "doubt": {
      const status = m.cancelled
        ? "cancelled"
        : open
          ? "waiting_confirmation"
          : d.s === "reject"
            ? "failed"
            : "completed";
      return { status, effects: { s: d.s === "approve" ? 2 : 1 }, compensations: { s: 0 } };
    }
  }
}

export const TERMINAL = new Set(["completed", "failed", "cancelled", "rolled_back", "rollback_failed"]);
