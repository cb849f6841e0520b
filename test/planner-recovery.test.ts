/**
 * A process that dies while the planner node plans a request (only the graph's input is
 * checkpointed): the process that takes the run over continues the planner node from the
 * checkpoint, and the planner still sees the run's workspace and skill allowlist, which are not
 * part of the graph input (graphs/io.ts) and travel with every drive.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { RunState } from "../graphs/state.js";
import { Planner, type PlanningInput, type PlanningOutcome } from "../src/planner/index.js";
import { SkillRegistry } from "../src/skills/registry.js";
import { coreSkills } from "../skills/core/index.js";
import type { Runtime } from "../src/runtime/runtime.js";
import type { Database } from "../src/store/db.js";
import { postgresBackend } from "./helpers/backends.js";
import { waitFor } from "./helpers/wait.js";

/** Records what each planning call was allowed; the first call blocks until its signal aborts. */
class RecordingPlanner extends Planner {
  calls: { workspaceId?: string; qtableAllowed?: boolean; coreAllowed?: boolean }[] = [];
  constructor() {
    super({ registry: new SkillRegistry(coreSkills), config: {} });
  }
  override async plan(input: PlanningInput): Promise<PlanningOutcome> {
    this.calls.push({
      workspaceId: input.workspaceId,
      qtableAllowed: input.allowSkill?.("qtable.task.split"),
      coreAllowed: input.allowSkill?.("core.pass"),
    });
    if (this.calls.length === 1) {
      await new Promise((_, reject) =>
        input.signal?.addEventListener("abort", () => reject(input.signal!.reason), { once: true }),
      );
    }
    return {
      plan: {
        steps: [{ stepId: "a", skillName: "core.pass", dependsOn: [], arguments: { value: input.request } }],
        onFailure: "skip_dependents",
        rollbackMode: "best_effort",
      } as never,
      planner: { kind: "fallback" } as never,
      warnings: [],
      repairRounds: 0,
      durationMs: 1,
    };
  }
}

describe(`a crash while planning (${postgresBackend.name})`, () => {
  const planner = new RecordingPlanner();
  let a: Runtime;
  let b: Runtime;
  let db: Database;
  let close: () => Promise<void>;
  beforeAll(async () => {
    const pair = await postgresBackend.openPair({ leaseTtlMs: 400, planner });
    ({ a, b, close } = pair);
    db = pair.db!;
  }, 120_000);
  afterAll(async () => close?.());

  test("the run taken over keeps its workspace and allowlist", async () => {
    const h = a.runRequest("say hello", { workspaceId: "ws-seed", allowSkill: (n) => n.startsWith("core.") });
    h.result.catch(() => undefined);
    await waitFor(() => planner.calls.length === 1, { timeoutMs: 60_000, what: "the first planning call" });
    expect(planner.calls[0]).toEqual({ workspaceId: "ws-seed", qtableAllowed: false, coreAllowed: true });
    // while only the graph's input is checkpointed, the run reads as not started (not a 500)
    expect(["queued", "planning"]).toContain((await a.getRun(h.runId)).status);
    // the executor is gone (its lease taken, then expired): only the input is checkpointed
    const runs = `"${db.schema}".tool_chain_runs`;
    await db.pool.query(
      `UPDATE ${runs} SET lease_owner = 'dead-process', lease_expires_at = now() - interval '1 second' WHERE run_id = $1`,
      [h.runId],
    );
    h.release?.();
    await waitFor(async () => (await b.recover()).includes(h.runId) || planner.calls.length > 1, {
      timeoutMs: 60_000,
      intervalMs: 200,
      what: "another process taking the run over",
    });
    await waitFor(async () => (await b.getRun(h.runId)).status === "completed", {
      timeoutMs: 60_000,
      intervalMs: 100,
      retryErrors: true,
      what: "the run completed",
    });
    expect(planner.calls.slice(1)).toEqual([{ workspaceId: "ws-seed", qtableAllowed: false, coreAllowed: true }]);
    const state = (
      await (b as unknown as { graph: { getState(c: unknown): Promise<{ values: RunState }> } }).graph.getState({
        configurable: { thread_id: h.runId },
      })
    ).values;
    expect(state.workspaceId).toBe("ws-seed");
    expect(state.allowedSkills).toEqual(expect.arrayContaining(["core.pass"]));
    expect(state.allowedSkills).not.toContain("qtable.task.split");
  }, 180_000);
});
