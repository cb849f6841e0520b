/**
 * README promises of the runtime that had no test failing without them (issue 22, "Every promise
 * tested"), on memory and on Postgres (embedded, or the server at DATABASE_URL):
 * - the first cancel reason wins;
 * - a worker that claims a run with a recorded cancel applies it before anything runs, and a step
 *   the dead process left in doubt is reconciled (applied: compensated; not applied: cancelled)
 *   or, when its skill cannot tell, ends EFFECT_UNKNOWN (never "not run", never run again);
 * - TOOLCHAIN_WORKER_MAX_ACTIVE stops claiming;
 * - retention never prunes a run holding a lease or an unapplied decision;
 * - a normal drive resets the failure count, and a lost lease is not a failure;
 * - fail_fast and the deadline stop a limit wait.
 */
import { afterEach, describe, expect, test } from "vitest";
import { configFromEnv } from "../src/server/serve.js";
import { backends } from "./helpers/backends.js";
import { openCrashableWorld } from "./helpers/crashable.js";
import { HangSwitch, modelSkills } from "./helpers/model-skills.js";
import { ConcurrencyProbe, EffectLedger, effectSkill, Gates, gateSkill, probeSkill } from "./helpers/skills.js";
import { waitFor } from "./helpers/wait.js";
import type { Runtime } from "../src/runtime/runtime.js";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

describe.each(["memory", "postgres"] as const)("cancels recorded for a run whose process died, on %s", (kind) => {
  /** A run whose process died mid-step (effect out, lease left to expire); what the others see. */
  async function abandonedRun(skillName = "m.write") {
    const ledger = new EffectLedger();
    const hangs = new HangSwitch();
    const world = await openCrashableWorld(kind, {
      skills: modelSkills(ledger, hangs),
      leaseTtlMs: 400,
      decisionPollMs: 30,
    });
    closers.push(async () => {
      hangs.releaseAll();
      await world.close();
    });
    const plan = {
      steps: [
        { stepId: "s", skillName, arguments: { label: "s", hang: true } },
        { stepId: "t", skillName: "m.write", dependsOn: ["s"], arguments: { label: "t" } },
      ],
    };
    const h = world.procs[0]!.runtime.run(plan);
    await waitFor(() => ledger.effects.get(`${h.runId}:s`) === 1, { what: "the step's effect started" });
    world.crash(0);
    hangs.releaseAll();
    h.result.catch(() => undefined);
    // what the dead process had already sent lands (or fails) before anyone counts events
    await world.settled(0);
    return { world, ledger, runId: h.runId, b: world.procs[1]!.runtime };
  }
  /** The live process takes the run over once the dead one's lease expired (it may already drive it, from its own cancel). */
  const takeOver = async (b: Runtime, runId: string) => {
    let seen = "";
    try {
      await waitFor(
        async () => {
          await b.recover();
          const row = await b.store.getRow(runId);
          const active = b.activeRuns().includes(runId);
          seen = JSON.stringify({ ...row, plan: undefined, active });
          return row?.status === "cancelled" && row.leaseOwner === null && !active;
        },
        { timeoutMs: 20_000, intervalMs: 25, what: `run ${runId} taken over and cancelled` },
      );
    } catch (e) {
      // what the run stood at, for a failure that only shows under load
      const events = (await b.events(runId)).map((x) => `${x.type}${x.stepId ? `:${x.stepId}` : ""}`);
      throw new Error(`${(e as Error).message}; last row ${seen}; events ${events.join(" ")}`);
    }
  };

  test("the first cancel reason wins: a second cancel recorded before anyone applied the first changes nothing", async () => {
    const { b, runId } = await abandonedRun();
    const first = await b.cancel(runId, "first reason");
    const second = await b.cancel(runId, "second reason");
    expect((await b.store.getRow(runId))!.cancelRequest).toMatchObject({ reason: "first reason" });
    await takeOver(b, runId);
    const view = await first.result;
    expect(view.status).toBe("cancelled");
    expect(view.error).toMatchObject({ code: "CANCELLED", message: "first reason" });
    expect((await second.result).error).toMatchObject({ message: "first reason" });
    const failed = (await b.events(runId)).filter((e) => e.type === "run_failed");
    expect(failed).toHaveLength(1);
    expect(JSON.stringify(failed[0]!.data)).toContain("first reason");
    expect(JSON.stringify(await b.events(runId))).not.toContain("second reason");
  }, 120_000);

  test("the audit event of a cancel is stored before a driver can see the request; racing cancels name one winner in both", async () => {
    const { b, runId } = await abandonedRun();
    // what the store held at the moment the row's request was written (the moment a driver may act on it)
    const seen: string[][] = [];
    const requestCancel = b.store.requestCancel.bind(b.store);
    b.store.requestCancel = async (...args) => {
      seen.push((await b.store.list(runId)).map((e) => e.type));
      return requestCancel(...args);
    };
    const [x, y] = await Promise.all([b.cancel(runId, "reason x"), b.cancel(runId, "reason y")]);
    for (const types of seen) expect(types).toContain("run_cancel_requested");
    const events = (await b.events(runId)).filter((e) => e.type === "run_cancel_requested");
    expect(events).toHaveLength(1);
    const row = (await b.store.getRow(runId))!.cancelRequest!;
    expect(row.reason).toBe((events[0]!.data as { reason: string }).reason);
    await takeOver(b, runId);
    expect((await x.result).error).toMatchObject({ message: row.reason });
    expect((await y.result).error).toMatchObject({ message: row.reason });
  }, 120_000);

  /** The takeover under a recorded cancel; the events after it, and the final view. */
  async function cancelAndTakeOver(skillName: string) {
    const r = await abandonedRun(skillName);
    await r.b.store.requestCancel(r.runId, "stop before anything else runs");
    const seqBefore = (await r.b.events(r.runId)).length;
    await takeOver(r.b, r.runId);
    const after = (await r.b.events(r.runId)).slice(seqBefore);
    const view = await r.b.getRun(r.runId);
    // whatever s's fate, nothing executes again and t never runs
    expect(view.status).toBe("cancelled");
    expect(view.pendingConfirmations).toEqual([]);
    expect(after.map((e) => e.type).filter((t) => t === "step_started" || t === "step_retrying")).toEqual([]);
    expect(r.ledger.effects.get(`${r.runId}:s`)).toBe(1);
    expect(r.ledger.effects.get(`${r.runId}:t`)).toBeUndefined();
    expect(view.steps.find((x) => x.stepId === "t")!.status).toBe("cancelled");
    // a compensation's idempotency key is the step's with a suffix per compensation attempt
    const undos = [...r.ledger.compensations]
      .filter(([k]) => k.startsWith(`${r.runId}:s:`))
      .reduce((a, [, n]) => a + n, 0);
    return { ...r, after, view, undos, s: view.steps.find((x) => x.stepId === "s")! };
  }

  test("a worker that claims a run with a recorded cancel applies it before anything runs; a step in doubt whose skill cannot tell ends EFFECT_UNKNOWN, not 'not run'", async () => {
    const { after, s, undos } = await cancelAndTakeOver("m.write");
    // its intent was claimed by the dead process: the effect may have happened (it did), so it
    // is neither reported as not run nor run again, and not compensated (nobody knows it happened)
    expect(s.status).toBe("failed");
    expect(s.error).toMatchObject({
      code: "EFFECT_UNKNOWN",
      effectStarted: true,
      details: { inDoubt: true, attempt: 1 },
    });
    expect(s.error!.message).toContain("may or may not have happened");
    expect(after.filter((e) => e.type === "step_failed").map((e) => e.stepId)).toEqual(["s"]);
    expect(after.filter((e) => e.type === "step_cancelled").map((e) => e.stepId)).toEqual(["t"]);
    expect(after.map((e) => e.type)).toContain("run_failed");
    expect(undos).toBe(0);
  }, 120_000);

  test("a cancel of a run waiting on a step in doubt ends that step EFFECT_UNKNOWN, not 'not run'", async () => {
    const { b, runId, ledger } = await abandonedRun("m.write");
    await waitFor(
      async () => {
        await b.recover();
        return (await b.getRun(runId)).pendingConfirmations.some((p) => p.stepId === "s" && p.kind === "in_doubt");
      },
      { timeoutMs: 20_000, intervalMs: 25, what: "s waits as in doubt" },
    );
    const seqBefore = (await b.events(runId)).length;
    await b.cancel(runId, "stop it");
    await takeOver(b, runId);
    const view = await b.getRun(runId);
    const s = view.steps.find((x) => x.stepId === "s")!;
    expect(s.status).toBe("failed");
    expect(s.error).toMatchObject({ code: "EFFECT_UNKNOWN", details: { inDoubt: true, attempt: 1 } });
    expect(view.pendingConfirmations).toEqual([]);
    const after = (await b.events(runId)).slice(seqBefore).map((e) => e.type);
    expect(after).not.toContain("step_started");
    expect(ledger.effects.get(`${runId}:s`)).toBe(1);
    expect([...ledger.compensations.keys()].filter((k) => k.startsWith(`${runId}:s:`))).toEqual([]);
  }, 120_000);

  test("a step in doubt under a recorded cancel whose reconcile says applied completes and is compensated once", async () => {
    const { after, s, ledger, runId, undos } = await cancelAndTakeOver("m.checked");
    expect(ledger.reconciles.get(`${runId}:s`)).toBe(1);
    expect(s).toMatchObject({ status: "rolled_back", output: { label: "s" }, rollback: { status: "rolled_back" } });
    expect(after.filter((e) => e.type === "step_completed").map((e) => e.stepId)).toEqual(["s"]);
    expect(undos).toBe(1);
  }, 120_000);

  test("a step in doubt under a recorded cancel whose reconcile says not applied ends cancelled, nothing undone", async () => {
    const { after, s, ledger, runId, undos } = await cancelAndTakeOver("m.denies");
    expect(ledger.reconciles.get(`${runId}:s`)).toBe(1);
    expect(s.status).toBe("cancelled");
    expect(s.error).toMatchObject({ code: "CANCELLED", effectStarted: false });
    expect(s.error!.message).toContain("reconcile says attempt 1 had no effect");
    expect(
      after
        .filter((e) => e.type === "step_cancelled")
        .map((e) => e.stepId)
        .sort(),
    ).toEqual(["s", "t"]);
    expect(after.map((e) => e.type)).not.toContain("step_completed");
    expect(undos).toBe(0);
  }, 120_000);
});

describe.each(backends)("worker, retention and drive failures on $name", (backend) => {
  test("TOOLCHAIN_WORKER_MAX_ACTIVE stops claiming: one at a time with 1, the rest stay queued until room frees", async () => {
    const cfg = configFromEnv({ TOOLCHAIN_WORKER_MAX_ACTIVE: "1" } as NodeJS.ProcessEnv);
    expect(cfg.workerMaxActive).toBe(1);
    const gates = new Gates();
    const pair = await backend.openPair({ skills: [gateSkill(gates, new Map())] });
    closers.push(pair.close);
    // an API-only process submits; the worker process claims
    const ids: string[] = [];
    for (const g of ["g1", "g2", "g3"])
      ids.push(
        (await pair.a.submit({ steps: [{ stepId: "s", skillName: "test.gate", arguments: { gate: g } }] })).runId,
      );
    const stop = pair.b.startWorker({ pollMs: 20, maxActive: cfg.workerMaxActive });
    closers.unshift(stop);
    let maxActive = 0;
    const sample = setInterval(() => (maxActive = Math.max(maxActive, pair.b.activeRuns().length)), 5);
    try {
      await waitFor(() => pair.b.activeRuns().length === 1, { what: "one run claimed" });
      await new Promise((r) => setTimeout(r, 200)); // ten polls: still one
      expect(pair.b.activeRuns()).toHaveLength(1);
      // the other two are not claimed: no lease on them (a claimed run's row says queued until its drive syncs)
      const rows = await Promise.all(ids.map(async (id) => (await pair.a.store.getRow(id))!));
      expect(rows.filter((r) => r.leaseOwner !== null)).toHaveLength(1);
      expect(rows.filter((r) => r.leaseOwner === null).map((r) => r.status)).toEqual(["queued", "queued"]);
      for (const g of ["g1", "g2", "g3"]) gates.open(g);
      await waitFor(
        async () =>
          (await Promise.all(ids.map(async (id) => (await pair.a.store.getRow(id))!.status))).every(
            (s) => s === "completed",
          ),
        { what: "all three completed" },
      );
    } finally {
      clearInterval(sample);
      for (const g of ["g1", "g2", "g3"]) gates.open(g); // nothing left hanging for close
    }
    expect(maxActive).toBe(1);
  });

  test("retention never prunes a finished run that still holds a lease or has an unapplied decision", async () => {
    const pair = await backend.openPair();
    closers.push(pair.close);
    const { a, b } = pair;
    const done = async () =>
      (await a.run({ steps: [{ stepId: "x", skillName: "core.pass", arguments: { value: 1 } }] }).result).runId;
    const leased = await done();
    const decided = await done();
    const free = await done();
    // a drive finishing elsewhere (its lease not yet released), and a decision nobody applied yet
    expect(await a.store.acquireLease(leased, "process-finishing", 60_000)).toBe(true);
    expect(
      await a.store.recordDecision(decided, "x", 0, { decision: "approve", at: new Date().toISOString(), round: 0 }),
    ).toBe("recorded");
    await new Promise((r) => setTimeout(r, 10)); // "finished before now", also on a millisecond clock
    const pruned = await b.pruneCheckpoints({ olderThanMs: 0 });
    expect(pruned).toContain(free);
    expect(pruned).not.toContain(leased);
    expect(pruned).not.toContain(decided);
    expect((await a.store.getRow(leased))!.checkpointPruned).toBe(false);
    // once the lease is released and the decision applied, they go too
    await a.store.releaseLease(leased, "process-finishing");
    await a.store.markApplied(decided, await a.store.unappliedDecisions(decided));
    expect((await b.pruneCheckpoints({ olderThanMs: 0 })).sort()).toEqual([leased, decided].sort());
  });

  test("a normal drive resets the failure count; a lost lease is not counted as a failure", async () => {
    const ledger = new EffectLedger();
    const pair = await backend.openPair({
      skills: [effectSkill(ledger, { idempotent: true })],
      leaseTtlMs: 300,
      driveRetry: { maxFailures: 3, initialMs: 20, maxMs: 40 },
    });
    closers.push(pair.close);
    const { a, b } = pair;
    // one drive throws (its event batch cannot be stored): counted, re-driven, then completes.
    // Its batches are appended on their own (not riding in its node's writes: events-ride.ts), so
    // the failure is the batch's
    (a.store as { appendRider?: unknown }).appendRider = undefined;
    const append = a.store.append.bind(a.store);
    let failOnce = true;
    a.store.append = async (...args) => {
      if (failOnce) {
        failOnce = false;
        throw Object.assign(new Error("connection reset"), { code: "ECONNRESET" });
      }
      return append(...args);
    };
    const counted: number[] = [];
    const record = a.store.recordDriveFailure.bind(a.store);
    a.store.recordDriveFailure = async (...args) => {
      const out = await record(...args);
      counted.push((await a.store.getRow(args[0]))!.driveFailures);
      return out;
    };
    const v = await a.run({ steps: [{ stepId: "w", skillName: "test.effect", arguments: { label: "w" } }] }).result;
    expect(v.status).toBe("completed");
    expect(counted).toEqual([1]);
    expect((await a.store.getRow(v.runId))!.driveFailures).toBe(0);

    // a drive whose process paused past its lease: the other process took the run over
    const renew = a.store.renewLeases.bind(a.store);
    let paused = true;
    a.store.renewLeases = async (...args) => (paused ? new Set(args[0]) : renew(...args));
    const h = a.run({ steps: [{ stepId: "slow", skillName: "test.effect", arguments: { label: "slow", ms: 1_500 } }] });
    await waitFor(() => ledger.log.includes("effect:slow"), { what: "slow step started" });
    await waitFor(async () => (await b.recover()).includes(h.runId), { intervalMs: 25, what: "takeover by b" });
    paused = false; // a's next heartbeat finds the lease gone: its drive stops
    await waitFor(() => !a.activeRuns().includes(h.runId), { what: "a's drive stopped" });
    expect(counted).toEqual([1]); // not recorded as a failure
    const row = (await a.store.getRow(h.runId))!;
    expect(row.driveFailures).toBe(0);
    await b.drain();
    expect((await b.getRun(h.runId)).status).toBe("completed");
    expect((await a.store.getRow(h.runId))!.driveFailures).toBe(0);
  });
});

describe.each(backends)("a wait for a limit is stopped on $name", (backend) => {
  async function holder() {
    const probe = new ConcurrencyProbe();
    const o = await backend.open({ skills: [probeSkill(probe, { name: "test.serial", serialByKey: true })] });
    closers.push(o.close);
    const rt = o.runtime;
    // another run holds serial key k for a minute
    const hold = rt.run({ steps: [{ stepId: "h", skillName: "test.serial", arguments: { key: "k", ms: 60_000 } }] });
    await waitFor(() => probe.running === 1, { what: "key k held" });
    closers.unshift(async () => void (await (await rt.cancel(hold.runId, "test over")).result));
    return { rt, probe };
  }
  const startedSteps = async (rt: Awaited<ReturnType<typeof holder>>["rt"], runId: string) =>
    (await rt.events(runId)).filter((e) => e.type === "step_started").map((e) => e.stepId);

  test("fail_fast: a failing sibling stops a step waiting for a serial key; it never starts", async () => {
    const { rt, probe } = await holder();
    const t0 = Date.now();
    const v = await rt.run({
      onFailure: "fail_fast",
      steps: [
        { stepId: "w", skillName: "test.serial", arguments: { key: "k", ms: 1 } },
        { stepId: "late", skillName: "core.wait", arguments: { ms: 300 } },
        { stepId: "boom", skillName: "core.fail", dependsOn: ["late"], retry: { maxAttempts: 1 } },
      ],
    }).result;
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(v.status).toBe("failed");
    expect((await rt.events(v.runId)).some((e) => e.type === "step_waiting_for_limit" && e.stepId === "w")).toBe(true);
    expect(await startedSteps(rt, v.runId)).not.toContain("w");
    expect(v.steps.find((s) => s.stepId === "w")!.status).not.toBe("completed");
    expect(probe.maxPerKey.get("k")).toBe(1);
  });

  test("the run's deadline stops a step waiting for a serial key", async () => {
    const { rt } = await holder();
    const t0 = Date.now();
    const v = await rt.run({
      deadlineMs: 400,
      steps: [{ stepId: "w", skillName: "test.serial", arguments: { key: "k", ms: 1 } }],
    }).result;
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(v.status).toBe("failed");
    expect(await startedSteps(rt, v.runId)).not.toContain("w");
    expect(JSON.stringify(v.steps[0]!.error ?? v.error)).toMatch(/DEADLINE|deadline/);
  });
});
