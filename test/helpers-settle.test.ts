/**
 * The teardown helper (test/helpers/backends.ts `settle`): a run a failed test left in a long
 * retry backoff does not keep the teardown waiting; it is cancelled after the grace period. A run
 * that ends by itself within the grace period is left alone.
 */
import { z } from "zod";
import { expect, test } from "vitest";
import { MemorySaver } from "@langchain/langgraph";
import { Runtime } from "../src/runtime/runtime.js";
import { defineSkill } from "../src/skills/contract.js";
import { ErrorCode, ToolchainError } from "../src/kernel/errors.js";
import { settle } from "./helpers/backends.js";
import { waitFor } from "./helpers/wait.js";

const flaky = defineSkill({
  name: "t.flaky",
  description: "fails its first attempt with a retryable code",
  input: z.object({}),
  sideEffects: "none",
  idempotent: true,
  async execute(_a, ctx) {
    if (ctx.attempt === 1) throw new ToolchainError(ErrorCode.RATE_LIMITED, "busy", { effectStarted: false });
    return "ok";
  },
});

test("a run left in a 10-minute backoff is cancelled after the grace period; a finished one is untouched", async () => {
  const rt = new Runtime({ skills: [flaky], checkpointer: new MemorySaver() });
  const stuck = rt.run({
    steps: [
      {
        stepId: "a",
        skillName: "t.flaky",
        arguments: {},
        retry: { maxAttempts: 2, backoff: { kind: "fixed", initialMs: 600_000 }, retryOn: ["RATE_LIMITED"] },
      },
    ],
  });
  const done = rt.run({ steps: [{ stepId: "b", skillName: "core.wait", arguments: { ms: 50 } }] });
  await waitFor(async () => (await rt.getRun(stuck.runId)).steps[0]!.status === "retrying", { what: "a in backoff" });
  const t0 = Date.now();
  await settle(rt, 300);
  expect(Date.now() - t0).toBeLessThan(5_000);
  expect((await stuck.result).status).toBe("cancelled");
  expect((await done.result).status).toBe("completed");
  expect(rt.activeRuns()).toEqual([]);
});
