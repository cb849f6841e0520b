/**
 * README promise (Configuration and Security and limits): the compiled-plan cache is bounded,
 * 64 MiB by default (`TOOLCHAIN_PLAN_CACHE_BYTES`), in estimated bytes (4 × the plan's JSON);
 * the least recently used plan is dropped and recompiled when its run needs it again.
 */
import { afterEach, describe, expect, test } from "vitest";
import { compiledAs, compiledFor, compiledPlanCache, DEFAULT_COMPILED_PLAN_BYTES } from "../graphs/env.js";
import { createRuntime } from "../src/index.js";
import { postgresBackend } from "./helpers/backends.js";
import { approvalSkill, EffectLedger } from "./helpers/skills.js";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

const waitingPlan = (title: string) => ({
  steps: [
    { stepId: "a", skillName: "core.pass", arguments: { value: title } },
    { stepId: "p", skillName: "test.publish", dependsOn: ["a"], arguments: { title } },
  ],
});

describe("compiled-plan cache", () => {
  test("64 MiB by default; TOOLCHAIN_PLAN_CACHE_BYTES sets it for a runtime opened from the environment", async () => {
    expect(DEFAULT_COMPILED_PLAN_BYTES).toBe(64 * 1024 * 1024);
    expect(createRuntime().env.compiledPlans.maxSize).toBe(DEFAULT_COMPILED_PLAN_BYTES);
    const before = process.env.TOOLCHAIN_PLAN_CACHE_BYTES;
    process.env.TOOLCHAIN_PLAN_CACHE_BYTES = "123456";
    try {
      const o = await postgresBackend.open();
      closers.push(o.close);
      expect(o.runtime.env.compiledPlans.maxSize).toBe(123_456);
    } finally {
      if (before === undefined) delete process.env.TOOLCHAIN_PLAN_CACHE_BYTES;
      else process.env.TOOLCHAIN_PLAN_CACHE_BYTES = before;
    }
  }, 120_000);

  test("holds at most its bound in estimated bytes; an evicted run's plan is recompiled when it resumes", async () => {
    const ledger = new EffectLedger();
    // what one such plan is estimated at (its compiled form, defaults filled in)
    const probe = createRuntime({ skills: [approvalSkill(ledger)] });
    await probe.run(waitingPlan("tx")).result;
    const planBytes = probe.env.compiledPlans.calculatedSize;
    // room for two of these plans, not three
    const rt = createRuntime({
      skills: [approvalSkill(ledger)],
      env: { compiledPlans: compiledPlanCache(planBytes * 2 + planBytes / 2) },
    });
    const cache = rt.env.compiledPlans;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const v = await rt.run(waitingPlan(`t${i}`)).result;
      expect(v.status).toBe("waiting_confirmation");
      ids.push(v.runId);
      expect(cache.calculatedSize).toBeLessThanOrEqual(cache.maxSize);
    }
    // the two most recent are kept, the older ones were dropped
    expect([...cache.keys()].sort()).toEqual(ids.slice(3).sort());
    // the oldest run resumes: its plan is compiled again, and the run finishes as if nothing happened
    const done = await (await rt.confirm(ids[0]!, { stepId: "p", decision: "approve" })).result;
    expect(done.status).toBe("completed");
    expect(ledger.effects.get(`${ids[0]}:p`)).toBe(1);
    expect(cache.has(ids[0]!)).toBe(true);
    expect(cache.calculatedSize).toBeLessThanOrEqual(cache.maxSize);
    // a plan larger than the whole cache is not kept, and still runs
    const tiny = createRuntime({ skills: [approvalSkill(ledger)], env: { compiledPlans: compiledPlanCache(10) } });
    const v = await tiny.run({ steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: 1 } }] }).result;
    expect(v.status).toBe("completed");
    expect(tiny.env.compiledPlans.size).toBe(0);
  });

  test("a node executed again compiles its plan once; a plan that differs (a state edited in Studio) is compiled anew", async () => {
    const env = createRuntime().env;
    let compiles = 0;
    const compile = (plan: { steps: unknown[] }) => async () => {
      compiles++;
      return { plan } as never;
    };
    const plan = waitingPlan("x");
    await compiledFor(env, "r1", plan, compile(plan));
    // the same state object (a node executed again in the drive), then an equal copy (a checkpoint read back)
    await compiledFor(env, "r1", plan, compile(plan));
    await compiledFor(env, "r1", structuredClone(plan), compile(plan));
    expect(compiles).toBe(1);
    const edited = waitingPlan("y");
    const got = await compiledFor(env, "r1", edited, compile(edited));
    expect(compiles).toBe(2);
    expect(got.plan).toBe(edited);
    // and the edited plan is the one kept: the first object no longer matches by identity either
    await compiledFor(env, "r1", plan, compile(plan));
    expect(compiles).toBe(3);
  });

  test("a plan equal to its compiled form is accepted as it is (not stored again); one that compiled to something else is not", async () => {
    const env = createRuntime().env;
    const given = waitingPlan("x");
    const withDefaults = { ...given, onFailure: "skip_dependents" };
    await compiledFor(env, "r1", given, async () => ({ plan: withDefaults }) as never);
    expect(compiledAs(env, "r1", given)).toBe(false); // defaults were applied: the compiled plan is written
    expect(compiledAs(env, "r1", withDefaults)).toBe(true); // the compiled plan itself
    const canonical = waitingPlan("y");
    await compiledFor(env, "r2", canonical, async () => ({ plan: structuredClone(canonical) }) as never);
    expect(compiledAs(env, "r2", canonical)).toBe(true); // equal to its compiled form
    expect(compiledAs(env, "r2", structuredClone(canonical))).toBe(false); // not known to be: never compared deeply
    expect(compiledAs(env, "r3", canonical)).toBe(false); // nothing compiled for that run
  });
});
