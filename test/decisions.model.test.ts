/**
 * Model-based test (fast-check asyncModelRun) of decisions on a durable run: confirm, reject,
 * decisions for the wrong round, repeats, decisions for other steps, cancel from the other
 * "process" (two runtimes on one storage), recovery and retention, in random interleavings,
 * checked against a small model. SIGKILL crashes are the crash-point suite's job
 * (test/faults); here every command goes through the public Runtime API.
 *
 * Invariants after every command: each non-idempotent effect at most once; each applied
 * decision applied exactly once (one step_confirmed per (step, round)); a refused decision
 * changes nothing; the run's status is what the model says; the event log is gapless.
 */
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { backends } from "./helpers/backends.js";
import { EffectLedger, effectSkill } from "./helpers/skills.js";
import type { Runtime } from "../src/runtime/runtime.js";
import type { RunView } from "../src/runtime/view.js";

const STEPS = ["p", "q"] as const;
type StepName = (typeof STEPS)[number];
interface Model {
  decided: Partial<Record<StepName, "approve" | "reject">>;
  cancelled: boolean;
}
interface Real {
  a: Runtime;
  b: Runtime;
  runId: string;
  ledger: EffectLedger;
}

const plan = {
  onFailure: "skip_dependents",
  steps: [
    { stepId: "p", skillName: "test.effect", arguments: { label: "p" }, requireConfirmation: true },
    { stepId: "q", skillName: "test.effect", arguments: { label: "q" }, requireConfirmation: true },
    { stepId: "r", skillName: "test.effect", dependsOn: ["p"], arguments: { label: "r" } },
  ],
};

const finished = (m: Model) => m.cancelled || STEPS.every((s) => m.decided[s] !== undefined);
function expectedStatus(m: Model): string[] {
  if (m.cancelled) return ["rolled_back", "cancelled", "rollback_failed"];
  if (!finished(m)) return ["waiting_confirmation"];
  return STEPS.some((s) => m.decided[s] === "reject") ? ["failed"] : ["completed"];
}

async function settled(rt: Runtime, runId: string): Promise<RunView> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    await Promise.all([rt.drain()]);
    const v = await rt.getRun(runId);
    if (v.status !== "running" && v.status !== "queued" && v.status !== "planning") return v;
    if (Date.now() > deadline) throw new Error(`run ${runId} did not settle: ${v.status}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function checkInvariants(m: Model, r: Real): Promise<void> {
  await Promise.all([r.a.drain(), r.b.drain()]);
  const v = await settled(r.a, r.runId);
  expect(expectedStatus(m)).toContain(v.status);
  for (const [, n] of r.ledger.effects) expect(n).toBeLessThanOrEqual(1);
  for (const s of STEPS) {
    const effect = r.ledger.effects.get(`${r.runId}:${s}`) ?? 0;
    if (m.decided[s] === "reject" || m.decided[s] === undefined) expect(effect, `step ${s}`).toBe(0);
  }
  const events = await r.a.events(r.runId);
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  const confirmed = events.filter((e) => e.type === "step_confirmed").map((e) => e.key);
  expect(new Set(confirmed).size).toBe(confirmed.length);
  const decidedSteps = Object.keys(m.decided).sort();
  expect(events.filter((e) => e.type === "step_confirmed").map((e) => e.stepId).sort()).toEqual(m.cancelled ? expect.any(Array) : decidedSteps);
}

class Decide implements fc.AsyncCommand<Model, Real> {
  constructor(readonly step: StepName | "r" | "ghost", readonly decision: "approve" | "reject", readonly via: "a" | "b", readonly round: number | undefined) {}
  check() {
    return true;
  }
  async run(m: Model, r: Real) {
    const rt = this.via === "a" ? r.a : r.b;
    const valid = !m.cancelled && (this.step === "p" || this.step === "q") && m.decided[this.step] === undefined && (this.round === undefined || this.round === 0);
    // an exact repeat of a decision taken (a client retrying its request) answers with the run's
    // current state and resumes nothing, also once the run was cancelled meanwhile
    const repeat = (this.step === "p" || this.step === "q") && m.decided[this.step] === this.decision && (this.round === undefined || this.round === 0);
    let outcome: "ok" | string;
    try {
      const h = await rt.confirm(r.runId, { stepId: this.step, decision: this.decision, ...(this.round !== undefined ? { round: this.round } : {}) });
      await h.result;
      outcome = "ok";
    } catch (e) {
      outcome = (e as { code?: string }).code ?? String(e);
    }
    if (valid) {
      expect(outcome).toBe("ok");
      m.decided[this.step as StepName] = this.decision;
    } else if (repeat) {
      expect(outcome).toBe("ok"); // an exact repeat answers with the current state and resumes nothing
    } else {
      expect(["CONFIRMATION_NOT_PENDING", "RUN_NOT_ACTIVE"]).toContain(outcome);
    }
    await checkInvariants(m, r);
  }
  toString() {
    return `decide(${this.step}, ${this.decision}, via ${this.via}, round ${this.round})`;
  }
}

class Cancel implements fc.AsyncCommand<Model, Real> {
  constructor(readonly via: "a" | "b") {}
  check() {
    return true;
  }
  async run(m: Model, r: Real) {
    const rt = this.via === "a" ? r.a : r.b;
    const h = await rt.cancel(r.runId, "model cancel");
    await h.result.catch(() => undefined);
    if (!finished(m)) m.cancelled = true;
    await checkInvariants(m, r);
  }
  toString() {
    return `cancel(via ${this.via})`;
  }
}

class Recover implements fc.AsyncCommand<Model, Real> {
  constructor(readonly via: "a" | "b") {}
  check() {
    return true;
  }
  async run(m: Model, r: Real) {
    await (this.via === "a" ? r.a : r.b).recover();
    await checkInvariants(m, r);
  }
  toString() {
    return `recover(via ${this.via})`;
  }
}

class Prune implements fc.AsyncCommand<Model, Real> {
  check() {
    return true;
  }
  async run(m: Model, r: Real) {
    await r.a.pruneCheckpoints({ olderThanMs: 0 });
    await checkInvariants(m, r);
  }
  toString() {
    return "prune";
  }
}

const commands = [
  fc.tuple(fc.constantFrom<StepName | "r" | "ghost">("p", "q", "p", "q", "r", "ghost"), fc.constantFrom<"approve" | "reject">("approve", "reject"), fc.constantFrom<"a" | "b">("a", "b"), fc.constantFrom<number | undefined>(undefined, undefined, 0, 1)).map(
    ([s, d, v, round]) => new Decide(s, d, v, round),
  ),
  fc.constantFrom<"a" | "b">("a", "b").map((v) => new Cancel(v)),
  fc.constantFrom<"a" | "b">("a", "b").map((v) => new Recover(v)),
  fc.constant(new Prune()),
];

for (const backend of backends) {
  describe(`decision model on '${backend.name}'`, () => {
    test("random interleavings of decisions, repeats, wrong rounds, cancels, recovery and retention", async () => {
      let n = 0;
      await fc.assert(
        fc.asyncProperty(fc.commands(commands, { maxCommands: 8 }), async (cmds) => {
          const ledger = new EffectLedger();
          const pair = await backend.openPair({ skills: [effectSkill(ledger)] });
          try {
            const runId = `model-${n++}-${Math.random().toString(36).slice(2, 8)}`;
            const first = await pair.a.run(plan, { runId }).result;
            expect(first.status).toBe("waiting_confirmation");
            await fc.asyncModelRun(() => ({ model: { decided: {}, cancelled: false } as Model, real: { a: pair.a, b: pair.b, runId, ledger } }), cmds);
          } finally {
            await pair.close();
          }
        }),
        // a fixed seed keeps CI deterministic; MODEL_SEED=<n> explores other interleavings
        { numRuns: backend.name === "memory" ? 25 : 10, seed: Number(process.env.MODEL_SEED ?? 20261201) },
      );
    }, 600_000);
  });
}
