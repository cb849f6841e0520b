/**
 * Model-based test (fast-check fc.commands) of what users do to durable runs: several runs of the
 * kinds in helpers/decision-model.ts (confirmations, a fallback skill that asks, a strict rollback
 * waiting for its operator, a step in doubt after its process died), answered from two processes'
 * runtimes on one storage: valid decisions, exact repeats, racing decisions, refused decisions
 * (wrong round, wrong kind, unknown step, bad edited arguments, after the end), cancels while
 * waiting and racing a decision, processes that crash (a drive abandoned mid-step, its lease
 * left to expire and the run taken over by the other process), recovery and retention between
 * decisions.
 *
 * The oracle, after every command, for every run: its status, each step's effect count and
 * compensation count are exactly what the model implies (an approved step's effect once, a
 * rejected or undecided one never, compensations equal to what completed when cancelled); a
 * refused command changes nothing (events, row and view compared before and after); the event
 * log is gapless and each (step, round) is confirmed at most once.
 *
 * Coverage from the generated sequences is printed and held to minimums on the fixed seed; a
 * second seed (MODEL_SEED, else derived from the date) is printed so a failure can be replayed.
 */
import { randomInt } from "node:crypto";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { EffectLedger } from "./helpers/skills.js";
import { HangSwitch, modelSkills } from "./helpers/model-skills.js";
import { openCrashableWorld, type CrashableWorld } from "./helpers/crashable.js";
import {
  expected,
  KINDS,
  PLANS,
  STEPS,
  TERMINAL,
  VALID,
  waits,
  type Choice,
  type Kind,
  type RunModel,
} from "./helpers/decision-model.js";
import { waitFor } from "./helpers/wait.js";
import type { Runtime } from "../src/runtime/runtime.js";

const LEASE_TTL_MS = 300;
const FIXED_SEED = 20261201;
/** Random per run unless MODEL_SEED is given (printed, so a failure can be replayed). */
const secondSeed = process.env.MODEL_SEED ? Number(process.env.MODEL_SEED) : randomInt(1, 2_147_483_000);

interface Coverage {
  sequences: number;
  decisions: number;
  /** The fewest valid decisions one sequence applied. */
  fewestDecisionsInASequence: number;
  repeats: number;
  races: number;
  refused: number;
  cancels: number;
  midRunCancels: number;
  cancelsWonRace: number;
  completed: number;
  compensations: number;
  crashes: number;
  takeovers: number;
  prunes: number;
  /** Steps that finished after more than one attempt (a retry). */
  retried: number;
}
const newCoverage = (): Coverage => ({
  sequences: 0,
  decisions: 0,
  fewestDecisionsInASequence: Infinity,
  repeats: 0,
  races: 0,
  refused: 0,
  cancels: 0,
  midRunCancels: 0,
  cancelsWonRace: 0,
  completed: 0,
  compensations: 0,
  crashes: 0,
  takeovers: 0,
  prunes: 0,
  retried: 0,
});

interface Real {
  world: CrashableWorld;
  ledger: EffectLedger;
  hangs: HangSwitch;
  cov: Coverage;
}
interface Model {
  runs: RunModel[];
}

const rt = (r: Real, via: number): Runtime => r.world.procs[via]!.runtime;
const codeOf = async (p: () => Promise<unknown>): Promise<string> => {
  try {
    await p();
    return "ok";
  } catch (e) {
    return (e as { code?: string }).code ?? String(e);
  }
};
const count = (m: Map<string, number>, key: string) => m.get(key) ?? 0;

/** Every run settled: not executing anywhere, no live lease, waiting or terminal. */
async function settle(r: Real, m: Model): Promise<void> {
  for (const run of m.runs) {
    await waitFor(
      async () => {
        if (r.world.procs.some((p) => !p.dead && p.runtime.activeRuns().includes(run.runId))) return false;
        const row = await rt(r, 0).store.getRow(run.runId);
        return row && !row.leaseOwner && (row.status === "waiting_confirmation" || TERMINAL.has(row.status));
      },
      { timeoutMs: 20_000, what: `run ${run.runId} (${run.kind}) settled` },
    );
  }
}

async function snapshot(r: Real, runId: string) {
  const a = rt(r, 0);
  const events = (await a.events(runId)).map((e) => `${e.seq}:${e.type}:${e.stepId ?? ""}`);
  const row = await a.store.getRow(runId);
  const view = await a.getRun(runId);
  return {
    events,
    row: { status: row!.status, pending: row!.pendingConfirmations },
    view: {
      status: view.status,
      steps: view.steps.map((s) => [s.stepId, s.status, s.attempts, s.rollback?.status]),
      pending: view.pendingConfirmations,
    },
  };
}

async function checkRun(r: Real, run: RunModel): Promise<void> {
  const view = await rt(r, 0).getRun(run.runId);
  const effects = (s: string) =>
    count(r.ledger.effects, `${run.runId}:${s}`) + count(r.ledger.effects, `${run.runId}:${s}:fallback`);
  const undos = (s: string) =>
    [...r.ledger.compensations].filter(([k]) => k.startsWith(`${run.runId}:${s}:`)).reduce((a, [, n]) => a + n, 0);
  const where = `${run.kind} run ${run.runId} ${JSON.stringify(run.decided)}${run.cancelled ? " cancelled" : ""}`;
  if (run.raced) {
    // a cancel raced a decision: whatever ran once is compensated once, nothing twice
    expect(view.status, where).toBe("cancelled");
    for (const s of STEPS[run.kind]) {
      expect(effects(s), `${where}: effect ${s}`).toBeLessThanOrEqual(1);
      expect(undos(s), `${where}: compensation ${s}`).toBe(effects(s));
    }
  } else {
    const e = expected(run);
    expect(view.status, where).toBe(e.status);
    for (const s of STEPS[run.kind]) {
      expect(effects(s), `${where}: effect ${s}`).toBe(e.effects[s] ?? 0);
      expect(undos(s), `${where}: compensation ${s}`).toBe(e.compensations[s] ?? 0);
    }
    expect(view.pendingConfirmations.map((p) => `${p.stepId}:${p.round}`).sort(), where).toEqual(
      waits(run)
        .map((w) => `${w.stepId}:${w.round}`)
        .sort(),
    );
  }
  const events = await rt(r, 0).events(run.runId);
  expect(
    events.map((ev) => ev.seq),
    where,
  ).toEqual(events.map((_, i) => i + 1));
  const confirmed = events.filter((ev) => ev.type === "step_confirmed").map((ev) => ev.key);
  expect(new Set(confirmed).size, where).toBe(confirmed.length);
}

async function checkAll(m: Model, r: Real): Promise<void> {
  await settle(r, m);
  for (const run of m.runs) await checkRun(r, run);
}

const pick = <T>(xs: readonly T[], n: number): T => xs[n % xs.length]!;

class Start implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly kind: Kind,
    readonly via: number,
    readonly takeoverBy: "other" | "restarted",
  ) {}
  check = (m: Readonly<Model>) => m.runs.length < 4;
  async run(m: Model, r: Real) {
    const runId = `m-${this.kind}-${Math.random().toString(36).slice(2, 10)}`;
    const h = rt(r, this.via).run(PLANS[this.kind], { runId });
    if (this.kind === "doubt") {
      // the process dies while the step's effect is out: its lease expires, a live process takes over
      await waitFor(() => count(r.ledger.effects, `${runId}:s`) === 1, { what: `effect of ${runId} started` });
      r.world.crash(this.via);
      r.hangs.releaseAll();
      void h.result.catch(() => undefined);
      r.world.restart(this.via);
      r.cov.crashes++;
      const taker = this.takeoverBy === "other" ? 1 - this.via : this.via;
      await waitFor(async () => (await rt(r, taker).recover()).includes(runId), {
        timeoutMs: 10_000,
        intervalMs: 25,
        what: `takeover of ${runId}`,
      });
      r.cov.takeovers++;
    } else await h.result;
    m.runs.push({ kind: this.kind, runId, decided: {}, cancelled: false, raced: false });
    await checkAll(m, r);
  }
  toString = () =>
    `start(${this.kind}, via ${this.via}${this.kind === "doubt" ? `, taken over by ${this.takeoverBy}` : ""})`;
}

type Variant = "valid" | "repeat" | "wrongRound" | "wrongKind" | "ghost" | "badArguments" | "afterEnd";

class Decide implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly runN: number,
    readonly waitN: number,
    readonly choiceN: number,
    readonly via: number,
    readonly variant: Variant,
    readonly withRound: boolean,
  ) {}
  check = (m: Readonly<Model>) => m.runs.length > 0;
  async run(m: Model, r: Real) {
    const run = pick(m.runs, this.runN);
    const open = waits(run);
    const a = rt(r, this.via);
    const decidedSteps = Object.keys(run.decided);
    let variant = this.variant;
    if (variant === "valid" && !open.length) variant = decidedSteps.length ? "repeat" : "afterEnd";
    if (variant === "repeat" && !decidedSteps.length) variant = open.length ? "valid" : "afterEnd";
    if ((variant === "wrongRound" || variant === "wrongKind" || variant === "badArguments") && !open.length)
      variant = "afterEnd";
    if (variant === "valid") {
      const w = pick(open, this.waitN);
      const choice = pick(VALID[w.kind], this.choiceN);
      const h = await a.confirm(run.runId, {
        stepId: w.stepId,
        decision: choice,
        ...(this.withRound ? { round: w.round } : {}),
      });
      await h.result;
      run.decided[w.stepId] = choice;
      r.cov.decisions++;
      return checkAll(m, r);
    }
    if (variant === "repeat") {
      // a client retrying the request it already made: answered with the run's state, nothing resumes
      const stepId = pick(decidedSteps, this.waitN);
      const round = { p: 0, q: 0, f: 2, bad: 102, s: 1 }[stepId]!;
      const before = await snapshot(r, run.runId);
      expect(
        await codeOf(
          async () => (await a.confirm(run.runId, { stepId, decision: run.decided[stepId]!, round })).result,
        ),
      ).toBe("ok");
      expect(await snapshot(r, run.runId)).toEqual(before);
      r.cov.repeats++;
      return checkAll(m, r);
    }
    // refused: a stable code, and nothing changed
    const w = open.length
      ? pick(open, this.waitN)
      : { stepId: pick(STEPS[run.kind], this.waitN), round: 0, kind: "confirmation" as const };
    let input: Parameters<Runtime["confirm"]>[1];
    let code: string;
    if (variant === "wrongRound")
      [input, code] = [{ stepId: w.stepId, decision: "approve", round: w.round + 1 }, "CONFIRMATION_NOT_PENDING"];
    else if (variant === "wrongKind")
      [input, code] = [
        {
          stepId: w.stepId,
          decision:
            w.kind === "compensation"
              ? "mark_done"
              : w.kind === "in_doubt"
                ? "skip"
                : pick<Choice>(["skip", "mark_done"], this.choiceN),
        },
        "INVALID_DECISION",
      ];
    else if (variant === "badArguments")
      [input, code] = [{ stepId: w.stepId, decision: "approve", arguments: { label: 42 } }, "INVALID_ARGUMENTS"];
    else if (variant === "ghost")
      [input, code] = [
        { stepId: "ghost", decision: pick<Choice>(["approve", "reject"], this.choiceN) },
        "CONFIRMATION_NOT_PENDING",
      ];
    else {
      // a step that waits for nothing (decided, never asked, or the run ended): a different decision
      const idle = STEPS[run.kind].filter((s) => !open.some((o) => o.stepId === s));
      const stepId = idle.length ? pick(idle, this.waitN) : "ghost";
      const taken = run.decided[stepId];
      input = { stepId, decision: taken === "reject" ? "approve" : "reject" };
      code = "CONFIRMATION_NOT_PENDING";
    }
    const before = await snapshot(r, run.runId);
    expect(
      await codeOf(async () => (await a.confirm(run.runId, input)).result),
      `${variant} ${JSON.stringify(input)}`,
    ).toBe(code);
    expect(await snapshot(r, run.runId), `${variant} changed the run`).toEqual(before);
    r.cov.refused++;
    await checkAll(m, r);
  }
  toString = () =>
    `decide(run ${this.runN}, wait ${this.waitN}, choice ${this.choiceN}, via ${this.via}, ${this.variant}${this.withRound ? ", with round" : ""})`;
}

/** Both processes answer the same wait at once: equal answers both succeed, different ones: exactly one. */
class Race implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly runN: number,
    readonly waitN: number,
    readonly c1: number,
    readonly c2: number,
  ) {}
  check = (m: Readonly<Model>) => m.runs.some((run) => waits(run).length > 0);
  async run(m: Model, r: Real) {
    const run = pick(
      m.runs.filter((x) => waits(x).length > 0),
      this.runN,
    );
    const w = pick(waits(run), this.waitN);
    const [d1, d2] = [pick(VALID[w.kind], this.c1), pick(VALID[w.kind], this.c2)];
    const [o1, o2] = await Promise.all([
      codeOf(async () => (await rt(r, 0).confirm(run.runId, { stepId: w.stepId, decision: d1 })).result),
      codeOf(async () => (await rt(r, 1).confirm(run.runId, { stepId: w.stepId, decision: d2 })).result),
    ]);
    if (d1 === d2) expect([o1, o2]).toEqual(["ok", "ok"]);
    else {
      expect([o1, o2].sort()).toEqual(["CONFIRMATION_NOT_PENDING", "ok"]);
    }
    run.decided[w.stepId] = o1 === "ok" ? d1 : d2;
    r.cov.races++;
    r.cov.decisions++;
    await checkAll(m, r);
  }
  toString = () => `race(run ${this.runN}, wait ${this.waitN}, ${this.c1} vs ${this.c2})`;
}

class Cancel implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly runN: number,
    readonly via: number,
    readonly midRun: boolean,
  ) {}
  check = (m: Readonly<Model>) => m.runs.length > 0;
  async run(m: Model, r: Real) {
    // a cancel racing a decision needs a run with a confirmation open: take one when there is
    const racing = m.runs.filter((x) => x.kind === "approvals" && waits(x).length);
    const run = pick(this.midRun && racing.length ? racing : m.runs, this.runN);
    const open = waits(run);
    const before = await snapshot(r, run.runId);
    if (this.midRun && run.kind === "approvals" && open.length) {
      // the cancel lands while a decision is being applied by the other process
      const w = pick(open, this.runN);
      const decided = rt(r, 1 - this.via)
        .confirm(run.runId, { stepId: w.stepId, decision: "approve" })
        .then((h) => h.result);
      await new Promise((res) => setTimeout(res, this.runN % 3 === 0 ? 0 : 5));
      await (await rt(r, this.via).cancel(run.runId, "model cancel")).result.catch(() => undefined);
      const outcome = await codeOf(() => decided);
      expect(["ok", "CONFIRMATION_NOT_PENDING", "RUN_NOT_ACTIVE"]).toContain(outcome);
      await settle(r, m);
      const status = (await rt(r, 0).getRun(run.runId)).status;
      if (status !== "cancelled") {
        // the decision finished the run before the cancel arrived: the cancel found it ended
        expect(outcome).toBe("ok");
        run.decided[w.stepId] = "approve";
        r.cov.decisions++;
      } else {
        [run.raced, run.cancelled] = [true, true];
        r.cov.cancelsWonRace++;
      }
      r.cov.midRunCancels++;
    } else {
      await (await rt(r, this.via).cancel(run.runId, "model cancel")).result.catch(() => undefined);
      // a run that can no longer change answers with its view: nothing moved
      if (!open.length) expect(await snapshot(r, run.runId)).toEqual(before);
      else run.cancelled = true;
    }
    r.cov.cancels++;
    await checkAll(m, r);
  }
  toString = () => `cancel(run ${this.runN}, via ${this.via}${this.midRun ? ", racing a decision" : ""})`;
}

/** A process crashes between commands and is restarted (runs waiting for a decision need no process). */
class Crash implements fc.AsyncCommand<Model, Real> {
  constructor(readonly via: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    r.world.crash(this.via);
    r.world.restart(this.via);
    r.cov.crashes++;
    await checkAll(m, r);
  }
  toString = () => `crash+restart(${this.via})`;
}

class Recover implements fc.AsyncCommand<Model, Real> {
  constructor(readonly via: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    // nothing is abandoned between commands: recovery finds nothing of ours to take
    const taken = await rt(r, this.via).recover();
    for (const run of m.runs) expect(taken).not.toContain(run.runId);
    await checkAll(m, r);
  }
  toString = () => `recover(${this.via})`;
}

class Prune implements fc.AsyncCommand<Model, Real> {
  constructor(readonly via: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const pruned = await rt(r, this.via).pruneCheckpoints({ olderThanMs: 0 });
    // retention never takes a run that still waits for a decision
    for (const run of m.runs) if (waits(run).length) expect(pruned).not.toContain(run.runId);
    r.cov.prunes++;
    await checkAll(m, r);
  }
  toString = () => `prune(${this.via})`;
}

/**
 * The end of every sequence: the user answers whatever is still open (approve most often), from
 * alternating processes, so each sequence applies several valid decisions and its runs end.
 */
class Finish implements fc.AsyncCommand<Model, Real> {
  constructor(readonly choices: number[]) {}
  check = () => true;
  async run(m: Model, r: Real) {
    let i = 0;
    for (const run of m.runs)
      for (let w = waits(run)[0]; w; w = waits(run)[0]) {
        const c = this.choices[i % this.choices.length]!;
        // approve twice as often as any other answer
        const choice = c % 3 === 0 ? "approve" : pick(VALID[w.kind], c);
        await (
          await rt(r, i++ % 2).confirm(run.runId, { stepId: w.stepId, decision: choice })
        ).result;
        run.decided[w.stepId] = choice;
        r.cov.decisions++;
      }
    await checkAll(m, r);
    for (const run of m.runs) expect(TERMINAL.has((await rt(r, 0).getRun(run.runId)).status), run.runId).toBe(true);
  }
  toString = () => `finish(${this.choices.join(",")})`;
}

const via = fc.integer({ min: 0, max: 1 });
const n = fc.nat({ max: 11 });
const variant = fc.constantFrom<Variant>(
  "valid",
  "valid",
  "valid",
  "valid",
  "valid",
  "repeat",
  "wrongRound",
  "wrongKind",
  "ghost",
  "badArguments",
  "afterEnd",
);
const start = fc
  .tuple(fc.constantFrom<Kind>(...KINDS), via, fc.constantFrom<"other" | "restarted">("other", "restarted"))
  .map(([k, v, t]) => new Start(k, v, t));
const decide = fc.tuple(n, n, n, via, variant, fc.boolean()).map(([a, b, c, v, x, w]) => new Decide(a, b, c, v, x, w));
/** What a user does most is decide; every sequence starts runs first, then acts on them. */
const command = fc.oneof(
  { arbitrary: start, weight: 3 },
  { arbitrary: decide, weight: 8 },
  { arbitrary: fc.tuple(n, n, n, n).map(([a, b, c, d]) => new Race(a, b, c, d)), weight: 2 },
  {
    arbitrary: fc.tuple(n, via, fc.constantFrom(true, true, false)).map(([a, v, mid]) => new Cancel(a, v, mid)),
    weight: 2,
  },
  { arbitrary: via.map((v) => new Crash(v)), weight: 1 },
  { arbitrary: via.map((v) => new Recover(v)), weight: 1 },
  { arbitrary: via.map((v) => new Prune(v)), weight: 2 },
);
const sequence = fc
  .tuple(
    fc.array(start, { minLength: 1, maxLength: 3 }),
    fc.array(command, { minLength: 6, maxLength: 14 }),
    fc.array(n, { minLength: 1, maxLength: 4 }),
  )
  .map(([s, c, f]): fc.AsyncCommand<Model, Real>[] => [...s, ...c, new Finish(f)]);

/** Totals over the runs a seed generated (terminal statuses and compensations, from the ledger). */
function tally(m: Model, r: Real, cov: Coverage, views: Map<string, string>) {
  for (const run of m.runs) if (views.get(run.runId) === "completed") cov.completed++;
  for (const [k, n2] of r.ledger.compensations)
    if (m.runs.some((run) => k.startsWith(`${run.runId}:`))) cov.compensations += n2;
}

for (const kind of ["memory", "postgres"] as const) {
  describe(`decision model on '${kind}'`, () => {
    const ledger = new EffectLedger();
    const hangs = new HangSwitch();
    let world: CrashableWorld;
    beforeAll(async () => {
      world = await openCrashableWorld(kind, {
        skills: modelSkills(ledger, hangs),
        leaseTtlMs: LEASE_TTL_MS,
        decisionPollMs: 30,
      });
    }, 60_000);
    afterAll(async () => {
      hangs.releaseAll();
      await world?.close();
    });

    const explore = async (seed: number, numRuns: number, cov = newCoverage()): Promise<Coverage> => {
      await fc.assert(
        fc.asyncProperty(sequence, async (cmds) => {
          const m: Model = { runs: [] };
          const real: Real = { world, ledger, hangs, cov };
          const before = cov.decisions;
          await fc.asyncModelRun(() => ({ model: m, real }), cmds);
          const views = new Map<string, string>();
          for (const run of m.runs) {
            const view = await rt(real, 0).getRun(run.runId);
            views.set(run.runId, view.status);
            cov.retried += view.steps.filter((s) => s.attempts > 1).length;
          }
          tally(m, real, cov, views);
          cov.sequences++;
          cov.fewestDecisionsInASequence = Math.min(cov.fewestDecisionsInASequence, cov.decisions - before);
        }),
        { numRuns, seed, endOnFailure: kind === "postgres" },
      );
      return cov;
    };

    test(`fixed seed ${FIXED_SEED}: decisions, races, cancels, crashes and retention against the model; coverage held to minimums`, async () => {
      const t0 = Date.now();
      const cov = await explore(FIXED_SEED, kind === "memory" ? 16 : 10);
      console.log(
        `decision model '${world.name}' seed ${FIXED_SEED} coverage ${JSON.stringify(cov)} in ${Date.now() - t0} ms`,
      );
      expect(cov.decisions).toBeGreaterThanOrEqual(2.5 * cov.sequences);
      expect(cov.completed).toBeGreaterThanOrEqual(6);
      expect(cov.compensations).toBeGreaterThanOrEqual(4);
      expect(cov.crashes).toBeGreaterThanOrEqual(5);
      expect(cov.takeovers).toBeGreaterThanOrEqual(3);
      expect(cov.races).toBeGreaterThanOrEqual(3);
      expect(cov.refused).toBeGreaterThanOrEqual(10);
      expect(cov.cancels).toBeGreaterThanOrEqual(5);
      expect(cov.midRunCancels).toBeGreaterThanOrEqual(1);
      expect(cov.prunes).toBeGreaterThanOrEqual(3);
      expect(cov.retried).toBeGreaterThanOrEqual(3);
    }, 120_000);

    test(`a second seed (replay a failure with MODEL_SEED=${secondSeed})`, async () => {
      console.log(`decision model '${world.name}' second seed: MODEL_SEED=${secondSeed}`);
      const t0 = Date.now();
      // a random seed's coverage varies: explore a few more sequences (seed+1, …) until it reaches
      // the floors; a seed that cannot reach them in four rounds fails (and is replayable)
      const enough = (c: Coverage) =>
        c.decisions >= 10 && c.completed >= 2 && c.compensations >= 1 && c.takeovers >= 1 && c.refused >= 3;
      const cov = newCoverage();
      for (let round = 0; round < 4 && (round === 0 || !enough(cov)); round++)
        await explore(secondSeed + round, kind === "memory" ? 6 : 3, cov);
      console.log(
        `decision model '${world.name}' MODEL_SEED=${secondSeed} coverage ${JSON.stringify(cov)} in ${Date.now() - t0} ms`,
      );
      expect(cov.decisions).toBeGreaterThanOrEqual(10);
      expect(cov.completed).toBeGreaterThanOrEqual(2);
      expect(cov.compensations).toBeGreaterThanOrEqual(1);
      expect(cov.takeovers).toBeGreaterThanOrEqual(1);
      expect(cov.refused).toBeGreaterThanOrEqual(3);
    }, 120_000);
  });
}
