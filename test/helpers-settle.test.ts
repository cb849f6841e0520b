/**
 * The teardown helper (test/helpers/backends.ts `settle`): a run a failed test left in a long
 * retry backoff does not keep the teardown waiting; it is cancelled after the grace period. A run
 * that ends by itself within the grace period is left alone.
 */
import { expect, test } from "vitest";
import { MemorySaver } from "@langchain/langgraph";
import { Runtime } from "../src/runtime/runtime.js";
import { settle } from "./helpers/backends.js";
import { EffectLedger, effectSkill } from "./helpers/skills.js";
import { waitFor } from "./helpers/wait.js";

test("a run left in a 10-minute backoff is cancelled after the grace period; a finished one is untouched", async () => {
  const ledger = new EffectLedger();
  const rt = new Runtime({ skills: [effectSkill(ledger)], checkpointer: new MemorySaver() });
  const stuck = rt.run({
    steps: [
      {
        stepId: "a",
        skillName: "test.effect",
        // refused before any effect on attempt 1 (RATE_LIMITED, effect not started): retried after the backoff
        arguments: { label: "a", failBeforeEffect: true },
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
  expect(ledger.effects.size).toBe(0); // attempt 2 never ran
});
