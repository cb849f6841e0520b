/**
 * Saga compensation: completed steps are undone in reverse completion order, so a step is undone
 * only after every step that depended on it and completed later (compensate.ts runs one step's
 * compensation; what follows it is the pure `afterCompensation`, src/kernel/after-compensation.ts).
 * - best_effort: every compensation is attempted (retried per the step's policy); failures are
 *   recorded and the walk goes on.
 * - strict: one at a time; the first compensation that fails for good stops the walk, the rest
 *   stay untouched (`pending`), the run is `rollback_failed` and an operator decides (retry /
 *   skip / stop) through the confirmation mechanism (the rollback_approval node).
 * A side-effecting step without compensation is `not_compensable`, never counted as rolled back.
 * A cancel that arrives during a rollback started by fail_fast or the deadline aborts the
 * compensation in flight and stops the walk (the rest stay `pending`, the run ends
 * `rollback_failed`, no operator wait: the caller said stop).
 */
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { afterCompensation, type CompensationResult } from "../../src/kernel/after-compensation.js";
import type { StepError } from "../../src/kernel/errors.js";
import { EventType } from "../../src/kernel/events.js";
import { compilePlanAsync } from "../../src/plan/validate.js";
import { versionShifted } from "../../src/skills/version.js";
import { compiledFor, type RuntimeEnv } from "../env.js";
import type { RunState, RunUpdate } from "../state.js";
import { compensate } from "./compensate.js";
import { compensationFor, notCompensableError } from "./how.js";
import { applyAnswer, block, finish, needsWork, recordOutcome } from "./record.js";
import { openWalk } from "./walk.js";

export function makeCompensationNode(env: RuntimeEnv) {
  return async function compensation(state: RunState, config: LangGraphRunnableConfig): Promise<RunUpdate> {
    const compiled = await compiledFor(env, state.runId, state.plan, () =>
      compilePlanAsync(state.plan, {
        registry: env.registry,
        skipArgumentsOf: versionShifted(state.skillVersions, (n) => env.registry.get(n)),
      }),
    );
    const w = openWalk(env, config, state, compiled);
    const order = [...state.completionOrder]
      .reverse()
      .filter((id) => state.steps[id]?.status === "completed" || state.steps[id]?.status === "rollback_failed");
    w.emit(EventType.rollback_started, undefined, {
      mode: w.mode,
      steps: order.filter((id) => state.steps[id]!.status === "completed"),
    });

    let stopped = applyAnswer(w);
    let cancelled = false;
    for (const id of order) {
      const r = w.rec(id);
      if (!needsWork(r)) continue;
      if (stopped) {
        w.set(id, { rollback: "pending" });
        continue;
      }
      const c = compiled.byId.get(id)!;
      const how = compensationFor(c, r, env);
      if (how.kind === "not_needed") {
        w.set(id, { rollback: "not_needed" });
        continue;
      }
      let result: CompensationResult;
      let error: StepError | undefined;
      if (how.kind === "not_compensable") {
        result = { ok: false, notCompensable: true };
        error = notCompensableError(c, r, how.why);
      } else {
        const done = await compensate(w, c, r, how);
        w.set(id, { rollbackAttempts: (r.rollbackAttempts ?? 0) + done.attempts });
        result = done;
        if (!done.ok) error = done.error;
      }
      const after = afterCompensation(w.mode, result, w.stopSignal.aborted);
      recordOutcome(w, id, after, error);
      if (after.kind === "cancelled") cancelled = true;
      if (after.next === "stop") stopped = true;
      if (after.next === "block") return block(w, id, order.slice(order.indexOf(id) + 1), error!, c.skill.name);
    }
    return finish(w, stopped, cancelled);
  };
}
