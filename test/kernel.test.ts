/**
 * The execution kernel end to end through the library entry point, on MemorySaver.
 */
import { describe, expect, test } from "vitest";
import { createRuntime, type RunEvent, type RunView } from "../src/index.js";
import { ConcurrencyProbe, EffectLedger, effectSkill, Gates, gateSkill, probeSkill } from "./helpers/skills.js";
import { settle, stepOf } from "./helpers/run.js";
import { waitFor } from "./helpers/wait.js";

const step = stepOf;
const noRetry = { maxAttempts: 1 } as const;

describe("scheduling", () => {
  test("a fast branch's successor starts and finishes before a slow sibling ends (real timers)", async () => {
    const rt = createRuntime();
    const { events, view } = await settle(
      rt.run({
        steps: [
          { stepId: "a", skillName: "core.wait", arguments: { ms: 20 } },
          { stepId: "b", skillName: "core.wait", arguments: { ms: 600 } },
          { stepId: "c", skillName: "core.wait", dependsOn: ["a"], arguments: { ms: 20 } },
        ],
      }),
    );
    expect(view.status).toBe("completed");
    const seqOf = (type: string, id: string) => events.find((e) => e.type === type && e.stepId === id)!.seq;
    expect(seqOf("step_started", "c")).toBeLessThan(seqOf("step_completed", "b"));
    expect(seqOf("step_completed", "c")).toBeLessThan(seqOf("step_completed", "b"));
    // c finished long before b: no superstep barrier between them
    expect(Date.parse(step(view, "c").finishedAt!)).toBeLessThan(Date.parse(step(view, "b").finishedAt!) - 300);
  });

  test("maxConcurrency, serial keys and resource limits hold in real runs", async () => {
    const probe = new ConcurrencyProbe();
    const rt = createRuntime({
      skills: [
        probeSkill(probe, { name: "test.serial", serialByKey: true }),
        probeSkill(probe, { name: "test.limited", resource: { name: "provider", limit: 2 } }),
      ],
    });
    const steps = [
      ...Array.from({ length: 6 }, (_, i) => ({
        stepId: `s${i}`,
        skillName: "test.serial",
        arguments: { key: `k${i % 2}`, ms: 15 },
      })),
      ...Array.from({ length: 6 }, (_, i) => ({
        stepId: `r${i}`,
        skillName: "test.limited",
        arguments: { key: "provider", ms: 15 },
      })),
    ];
    const { view } = await settle(rt.run({ steps, maxConcurrency: 4 }));
    expect(view.status).toBe("completed");
    expect(probe.maxRunning).toBeLessThanOrEqual(4);
    expect(probe.maxPerKey.get("k0")).toBe(1);
    expect(probe.maxPerKey.get("k1")).toBe(1);
    expect(probe.maxPerKey.get("provider")).toBe(2);
  });

  test("parallelSafe: false serialises a skill's steps", async () => {
    const probe = new ConcurrencyProbe();
    const base = probeSkill(probe, { name: "test.unsafe" });
    const rt = createRuntime({ skills: [{ ...base, parallelSafe: false }] });
    const steps = Array.from({ length: 4 }, (_, i) => ({
      stepId: `u${i}`,
      skillName: "test.unsafe",
      arguments: { key: `k${i}`, ms: 10 },
    }));
    const { view } = await settle(rt.run({ steps }));
    expect(view.status).toBe("completed");
    expect(probe.maxRunning).toBe(1);
  });
});

describe("segments", () => {
  test("a long run is cut into scheduler segments without changing its outcome", async () => {
    const ledger = new EffectLedger();
    const rt = createRuntime({ skills: [effectSkill(ledger)], env: { segmentTasks: 3 } });
    const steps = [
      ...Array.from({ length: 12 }, (_, i) => ({
        stepId: `c${i}`,
        skillName: "test.effect",
        dependsOn: i ? [`c${i - 1}`] : [],
        arguments: { label: `c${i}` },
      })),
      ...Array.from({ length: 8 }, (_, i) => ({
        stepId: `f${i}`,
        skillName: "core.fail",
        arguments: { untilAttempt: 2, value: i },
        retry: { maxAttempts: 2, backoff: { kind: "fixed" as const, initialMs: 5 } },
      })),
    ];
    const { events, view } = await settle(rt.run({ steps, maxConcurrency: 3 }));
    expect(view.status).toBe("completed");
    expect([...ledger.effects.values()]).toEqual(Array(12).fill(1));
    expect(view.steps.filter((s) => s.stepId.startsWith("f")).map((s) => s.attempts)).toEqual(Array(8).fill(2));
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.type === "step_completed")).toHaveLength(20);
  });
});

describe("references", () => {
  test("resolve context, step outputs at depth and memory saved by saveResultAs", async () => {
    const rt = createRuntime();
    const { view } = await settle(
      rt.run(
        {
          steps: [
            {
              stepId: "split",
              skillName: "core.pass",
              arguments: { value: { tasks: [{ title: "design" }, { title: "build" }] } },
              saveResultAs: "plan",
            },
            {
              stepId: "use",
              skillName: "core.pass",
              dependsOn: ["split"],
              arguments: {
                value: {
                  table: { $ref: "context.table.id" },
                  first: { $ref: "steps.split.tasks.0.title" },
                  all: { $ref: "memory.plan.tasks" },
                  owner: { $ref: "memory.owner" },
                  literal: { $literal: { $ref: "not.a.ref" } },
                },
              },
            },
          ],
        },
        { context: { table: { id: "tbl_1" } }, memory: { owner: "ana" } },
      ),
    );
    expect(view.status).toBe("completed");
    expect(step(view, "use").output).toEqual({
      table: "tbl_1",
      first: "design",
      all: [{ title: "design" }, { title: "build" }],
      owner: "ana",
      literal: { $ref: "not.a.ref" },
    });
    expect(view.memory.plan).toEqual({ tasks: [{ title: "design" }, { title: "build" }] });
  });

  test("a path missing from a step's output fails the step with INVALID_REFERENCE and no attempt", async () => {
    const rt = createRuntime();
    const { view } = await settle(
      rt.run({
        steps: [
          { stepId: "a", skillName: "core.pass", arguments: { value: { x: 1 } } },
          { stepId: "b", skillName: "core.pass", dependsOn: ["a"], arguments: { value: { $ref: "steps.a.y.z" } } },
        ],
      }),
    );
    expect(view.status).toBe("failed");
    expect(step(view, "b").status).toBe("failed");
    expect(step(view, "b").attempts).toBe(0);
    expect(step(view, "b").error).toMatchObject({
      code: "INVALID_REFERENCE",
      message: 'arguments.value: $ref "steps.a.y.z" does not resolve: "steps.a.y" is missing',
    });
  });
});

describe("retries", () => {
  test("transient failures are retried up to maxAttempts", async () => {
    const rt = createRuntime();
    const { events, view } = await settle(
      rt.run({
        steps: [
          {
            stepId: "f",
            skillName: "core.fail",
            arguments: { untilAttempt: 3, value: "ok" },
            retry: { maxAttempts: 3, backoff: { kind: "fixed", initialMs: 5 } },
          },
        ],
      }),
    );
    expect(view.status).toBe("completed");
    expect(step(view, "f")).toMatchObject({ attempts: 3, output: "ok" });
    expect(events.filter((e) => e.type === "step_retrying").map((e) => e.data.nextAttempt)).toEqual([2, 3]);
  });

  test("INVALID_INPUT is deterministic and not retried by default; retryOn overrides", async () => {
    const rt = createRuntime();
    const { view } = await settle(
      rt.run({
        steps: [
          { stepId: "a", skillName: "core.fail", arguments: { code: "INVALID_INPUT" }, retry: { maxAttempts: 3 } },
          {
            stepId: "b",
            skillName: "core.fail",
            arguments: { code: "INVALID_INPUT", untilAttempt: 2 },
            retry: { maxAttempts: 3, retryOn: ["INVALID_INPUT"], backoff: { kind: "fixed", initialMs: 1 } },
          },
        ],
      }),
    );
    expect(step(view, "a")).toMatchObject({ status: "failed", attempts: 1 });
    expect(step(view, "b")).toMatchObject({ status: "completed", attempts: 2 });
  });

  test("a non-idempotent side effect that may have started is never retried automatically", async () => {
    const ledger = new EffectLedger();
    const rt = createRuntime({ skills: [effectSkill(ledger)] });
    const { view } = await settle(
      rt.run({
        steps: [
          {
            stepId: "send",
            skillName: "test.effect",
            arguments: { label: "mail", failAfterEffect: true },
            retry: { maxAttempts: 5, backoff: { kind: "fixed", initialMs: 1 } },
          },
        ],
      }),
    );
    expect(step(view, "send")).toMatchObject({
      status: "failed",
      attempts: 1,
      retrySuppressed: "non_idempotent_side_effect",
    });
    expect(ledger.effects.get(`${view.runId}:send`)).toBe(1);
  });

  test("...but is retried when the skill reports the effect did not start", async () => {
    const ledger = new EffectLedger();
    const rt = createRuntime({ skills: [effectSkill(ledger)] });
    const { view } = await settle(
      rt.run({
        steps: [
          {
            stepId: "send",
            skillName: "test.effect",
            arguments: { label: "mail", failBeforeEffect: true },
            retry: { maxAttempts: 3, backoff: { kind: "fixed", initialMs: 1 } },
          },
        ],
      }),
    );
    expect(step(view, "send")).toMatchObject({ status: "completed", attempts: 2 });
    expect(ledger.effects.get(`${view.runId}:send`)).toBe(1);
  });

  test("the idempotency key is stable across attempts", async () => {
    const keys: string[] = [];
    const rt = createRuntime({
      skills: [
        {
          name: "test.keys",
          description: "",
          input: (await import("zod")).z.object({}),
          sideEffects: "write",
          idempotent: true,
          async execute(_a: unknown, ctx: { idempotencyKey: string; attempt: number }) {
            keys.push(ctx.idempotencyKey);
            if (ctx.attempt < 3) throw new Error("boom");
            return null;
          },
        },
      ],
    });
    const { view } = await settle(
      rt.run({
        steps: [
          { stepId: "k", skillName: "test.keys", retry: { maxAttempts: 3, backoff: { kind: "fixed", initialMs: 1 } } },
        ],
      }),
    );
    expect(view.status).toBe("completed");
    expect(new Set(keys)).toEqual(new Set([`${view.runId}:k`]));
    expect(keys).toHaveLength(3);
  });
});

describe("timeouts and deadline", () => {
  test("a step over its timeoutMs is aborted with TIMEOUT", async () => {
    const rt = createRuntime();
    const t0 = Date.now();
    const { view } = await settle(
      rt.run({
        steps: [{ stepId: "slow", skillName: "core.wait", arguments: { ms: 5_000 }, timeoutMs: 50, retry: noRetry }],
      }),
    );
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(step(view, "slow")).toMatchObject({
      status: "failed",
      error: { code: "TIMEOUT", message: "step timed out after 50 ms" },
    });
  });

  test("the plan deadline stops the run: running steps cancelled, the rest never start", async () => {
    const rt = createRuntime();
    const { view } = await settle(
      rt.run({
        deadlineMs: 80,
        steps: [
          { stepId: "long", skillName: "core.wait", arguments: { ms: 5_000 } },
          { stepId: "after", skillName: "core.pass", dependsOn: ["long"], arguments: { value: 1 } },
        ],
      }),
    );
    expect(view.error).toMatchObject({ code: "DEADLINE_EXCEEDED" });
    expect(view.status).toBe("failed");
    expect(step(view, "long").status).toBe("cancelled");
    expect(step(view, "after").status).toBe("cancelled");
  });
});

describe("fallback and failure policies", () => {
  test("fallback value and fallback skill replace a step that failed for good", async () => {
    const rt = createRuntime();
    const { view } = await settle(
      rt.run({
        steps: [
          { stepId: "a", skillName: "core.fail", retry: noRetry, fallback: { value: { default: true } } },
          {
            stepId: "b",
            skillName: "core.fail",
            retry: noRetry,
            fallback: { skillName: "core.pass", arguments: { value: "from fallback" } },
          },
          {
            stepId: "c",
            skillName: "core.pass",
            dependsOn: ["a", "b"],
            arguments: { value: [{ $ref: "steps.a.default" }, { $ref: "steps.b" }] },
          },
        ],
      }),
    );
    expect(view.status).toBe("completed");
    expect(step(view, "a")).toMatchObject({ status: "completed", usedFallback: true, output: { default: true } });
    expect(step(view, "b")).toMatchObject({ status: "completed", usedFallback: true, output: "from fallback" });
    expect(step(view, "c").output).toEqual([true, "from fallback"]);
  });

  test("skip_dependents (default): dependents skipped, independent branches go on, partial results kept", async () => {
    const rt = createRuntime();
    const { events, view } = await settle(
      rt.run({
        steps: [
          { stepId: "bad", skillName: "core.fail", retry: noRetry },
          { stepId: "child", skillName: "core.pass", dependsOn: ["bad"], arguments: { value: 1 } },
          { stepId: "grandchild", skillName: "core.pass", dependsOn: ["child"], arguments: { value: 1 } },
          { stepId: "other", skillName: "core.wait", arguments: { ms: 30, value: "kept" } },
        ],
      }),
    );
    expect(view.status).toBe("failed");
    expect(view.steps.map((s) => [s.stepId, s.status])).toEqual([
      ["bad", "failed"],
      ["child", "skipped"],
      ["grandchild", "skipped"],
      ["other", "completed"],
    ]);
    expect(view.result?.outputs).toEqual({ other: "kept" });
    expect(
      events
        .filter((e) => e.type === "step_skipped")
        .map((e) => e.stepId)
        .sort(),
    ).toEqual(["child", "grandchild"]);
    expect(events.some((e) => e.type === "rollback_started")).toBe(false);
  });

  test("continue: the failure is tolerated and dependents still run", async () => {
    const rt = createRuntime();
    const { view } = await settle(
      rt.run({
        steps: [
          { stepId: "optional", skillName: "core.fail", retry: noRetry, onFailure: "continue" },
          { stepId: "next", skillName: "core.pass", dependsOn: ["optional"], arguments: { value: "ran" } },
        ],
      }),
    );
    expect(view.status).toBe("completed");
    expect(step(view, "optional").status).toBe("failed");
    expect(step(view, "next")).toMatchObject({ status: "completed", output: "ran" });
  });

  test("fail_fast: stop launching, abort running siblings, compensate completed steps in reverse completion order", async () => {
    const ledger = new EffectLedger();
    const rt = createRuntime({ skills: [effectSkill(ledger)] });
    const { events, view } = await settle(
      rt.run({
        onFailure: "fail_fast",
        steps: [
          { stepId: "w1", skillName: "test.effect", arguments: { label: "one" } },
          { stepId: "w2", skillName: "test.effect", dependsOn: ["w1"], arguments: { label: "two" } },
          { stepId: "slow", skillName: "core.wait", arguments: { ms: 5_000 } },
          { stepId: "boom", skillName: "core.fail", dependsOn: ["w2"], retry: noRetry },
          { stepId: "never", skillName: "core.pass", dependsOn: ["boom"], arguments: { value: 1 } },
        ],
      }),
    );
    expect(view.status).toBe("rolled_back");
    expect(step(view, "slow").status).toBe("cancelled");
    expect(step(view, "never").status).toBe("cancelled");
    expect(step(view, "w1")).toMatchObject({ status: "rolled_back", rollback: { status: "rolled_back" } });
    expect(ledger.log).toEqual(["effect:one", "effect:two", "undo:two", "undo:one"]);
    const types = events.map((e) => e.type);
    expect(types.indexOf("rollback_started")).toBeGreaterThan(types.indexOf("step_failed"));
    expect(types.at(-1)).toBe("run_failed");
  });
});

describe("events", () => {
  test("numbered 1..n without gaps, persisted, and replayable from any point", async () => {
    const rt = createRuntime();
    const h = rt.run({
      steps: [
        { stepId: "a", skillName: "core.pass", arguments: { value: 1 } },
        { stepId: "b", skillName: "core.pass", dependsOn: ["a"], arguments: { value: 2 } },
      ],
    });
    const { events, view } = await settle(h);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.map((e) => e.type)).toEqual([
      "planning_started",
      "planning_completed",
      "step_started",
      "step_completed",
      "step_started",
      "step_completed",
      "run_completed",
    ]);
    expect(await rt.events(view.runId)).toEqual(events);
    expect((await rt.events(view.runId, 4)).map((e) => e.seq)).toEqual([5, 6, 7]);
    expect(events.every((e) => e.runId === view.runId && !Number.isNaN(Date.parse(e.at)))).toBe(true);
  });

  test("the run view exports the plan graph as nodes, edges and Mermaid", async () => {
    const rt = createRuntime();
    const { view } = await settle(
      rt.run({
        steps: [
          { stepId: "a", skillName: "core.pass", arguments: { value: 1 } },
          { stepId: "b", skillName: "core.pass", dependsOn: ["a"], arguments: { value: 2 } },
        ],
      }),
    );
    expect(view.graph.nodes).toEqual([
      { id: "a", skillName: "core.pass", status: "completed" },
      { id: "b", skillName: "core.pass", status: "completed" },
    ]);
    expect(view.graph.edges).toEqual([{ from: "a", to: "b" }]);
    expect(view.graph.mermaid).toContain("a --> b");
  });
});

describe("cancellation", () => {
  test("cancel during a long step aborts it through its signal and compensates what completed", async () => {
    const ledger = new EffectLedger();
    const gates = new Gates();
    const rt = createRuntime({ skills: [effectSkill(ledger), gateSkill(gates, new Map())] });
    const h = rt.run({
      steps: [
        { stepId: "w", skillName: "test.effect", arguments: { label: "created" } },
        { stepId: "long", skillName: "core.wait", dependsOn: ["w"], arguments: { ms: 60_000 } },
      ],
    });
    const events: RunEvent[] = [];
    const reading = (async () => {
      for await (const e of h.events) events.push(e);
    })();
    await waitFor(() => events.some((e) => e.type === "step_started" && e.stepId === "long"), {
      what: "step long started",
    });
    const t0 = Date.now();
    await rt.cancel(h.runId, "user changed their mind");
    const view = await h.result;
    await reading;
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect(view.status).toBe("cancelled");
    expect(step(view, "long").status).toBe("cancelled");
    expect(step(view, "w").status).toBe("rolled_back");
    expect(ledger.log).toEqual(["effect:created", "undo:created"]);
    expect(view.error).toMatchObject({ code: "CANCELLED", message: "user changed their mind" });
  });
});
