/**
 * A process that dies while it applies an operator's answer to a blocked strict rollback: the
 * batch of events carrying the decision (`step_confirmed`) never commits, while the process goes
 * on writing checkpoints until it dies. Before the fix the graph finished (the compensation and
 * observer nodes' writes were saved) and the takeover found nothing to run: the decision was marked
 * applied with no `step_confirmed`, and `rollback_completed` was lost (the crash-point suite found
 * it killed at the observer's `checkpoint:putWrites`). Now a node's writes wait for its events
 * (graphs/emit.ts `eventsBeforeWrites`), so the takeover runs the compensation node again.
 */
import { MemorySaver } from "@langchain/langgraph";
import { expect, test } from "vitest";
import { Runtime } from "../src/runtime/runtime.js";
import { MemoryRunStore } from "../src/store/memory-run-store.js";
import type { RunStore } from "../src/store/run-store.js";
import { EffectLedger, effectSkill } from "./helpers/skills.js";
import { settle } from "./helpers/run.js";

/** The store as a process sees it that dies at the first append carrying `dieAt`: nothing it does afterwards lands. */
function dyingAt(store: MemoryRunStore, dieAt: string): { store: RunStore; died: Promise<void> } {
  let dead = false;
  let died!: () => void;
  const diedP = new Promise<void>((r) => (died = r));
  const never = new Promise<never>(() => undefined);
  const proxy = new Proxy(store, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        if (!dead && prop === "append" && (args[1] as { type: string }[]).some((e) => e.type === dieAt)) {
          dead = true;
          died();
        }
        // a dead process writes nothing more: no events, no lease heartbeat, no release
        if (dead && ["append", "renewLeases", "releaseLease", "sync", "markApplied"].includes(String(prop)))
          return never;
        return v.apply(target, args);
      };
    },
  });
  return { store: proxy as RunStore, died: diedP };
}

test("killed before the operator's rollback decision reached the event log: the takeover applies it once and ends the run", async () => {
  const ledger = new EffectLedger();
  const skills = [effectSkill(ledger), effectSkill(ledger, { name: "test.broken", compensationFailures: Infinity })];
  const store = new MemoryRunStore();
  const checkpointer = new MemorySaver();
  const dying = dyingAt(store, "step_confirmed");
  const first = new Runtime({ skills, checkpointer, store: dying.store, owner: "first", leaseTtlMs: 200 });
  const { view } = await settle(
    first.run({
      onFailure: "fail_fast",
      rollbackMode: "strict",
      steps: [
        { stepId: "w1", skillName: "test.effect", arguments: { label: "w1" } },
        {
          stepId: "bad",
          skillName: "test.broken",
          dependsOn: ["w1"],
          arguments: { label: "bad" },
          retry: { maxAttempts: 1 },
        },
        { stepId: "boom", skillName: "core.fail", dependsOn: ["bad"], retry: { maxAttempts: 1 } },
      ],
    }),
  );
  expect(view.pendingConfirmations).toEqual([expect.objectContaining({ stepId: "bad", kind: "compensation" })]);
  // the operator stops the rollback; the process applying it dies before its events are stored
  void first.confirm(view.runId, { stepId: "bad", decision: "reject" }).then((h) => h.result.catch(() => undefined));
  await dying.died;
  // what it may still write to the checkpoint before it is gone (before the fix: the rest of the graph)
  await new Promise((r) => setTimeout(r, 300));

  const second = new Runtime({ skills, checkpointer, store, owner: "second", leaseTtlMs: 200 });
  let done = await second.getRun(view.runId);
  for (let i = 0; i < 100 && (done.status !== "rollback_failed" || (await store.getRow(view.runId))?.leaseOwner); i++) {
    await second.recover();
    await second.drain();
    done = await second.getRun(view.runId);
  }
  const events = await second.events(view.runId);
  const types = events.map((e) => e.type);
  expect(events.filter((e) => e.type === "step_confirmed").map((e) => [e.stepId, e.key, e.data.decision])).toEqual([
    ["bad", "step_confirmed:bad:101", "reject"],
  ]);
  // the run's end after the decision: the rollback's and the run's terminal event
  expect(types.slice(types.indexOf("step_confirmed"))).toEqual(["step_confirmed", "rollback_completed", "run_failed"]);
  expect(events.at(-1)!.data.status).toBe("rollback_failed");
  expect(await store.unappliedDecisions(view.runId)).toEqual([]);
  expect((await store.getRow(view.runId))?.leaseOwner ?? null).toBeNull();
  expect(done.pendingConfirmations).toEqual([]);
  // the failed compensation ran once (the stop runs nothing), w1 was never undone
  expect(ledger.log.filter((l) => l.startsWith("undo:"))).toEqual([]);
});
