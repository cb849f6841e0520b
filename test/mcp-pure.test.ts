/** The pure parts of the MCP surface: progress from events, elicitation answers, tool results. */
import { describe, expect, test } from "vitest";
import fc from "fast-check";
import type { RunEvent } from "../src/kernel/events.js";
import { ProgressTracker } from "../src/mcp/progress.js";
import { answerOf, confirmationQuestion } from "../src/mcp/elicitation.js";
import { runSummary, toRunResult } from "../src/tools/results.js";
import { ToolChainRunResultSchema } from "../src/tools/definitions.js";

const TYPES = [
  "step_started",
  "step_completed",
  "step_failed",
  "step_skipped",
  "step_cancelled",
  "step_retrying",
  "step_waiting_confirmation",
  "run_completed",
] as const;

describe("ProgressTracker", () => {
  test("progress strictly grows, never passes total, and reaches it when every step finished", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.tuple(fc.constantFrom(...TYPES), fc.nat(7)), { maxLength: 60 }),
        (n, script) => {
          const ids = Array.from({ length: n }, (_, i) => `s${i}`);
          const t = new ProgressTracker(ids.map((stepId) => ({ stepId, status: "pending" as const })));
          const seen: number[] = [];
          const feed = (type: string, stepId: string | undefined, data: Record<string, unknown> = {}) => {
            const u = t.next({ runId: "r", seq: seen.length + 1, type, stepId, at: "", data, key: "" } as RunEvent);
            if (u) {
              expect(u.total).toBe(2 * n);
              seen.push(u.progress);
            }
          };
          for (const [type, i] of script) feed(type, ids[i % n]);
          for (const id of ids) feed("step_completed", id);
          for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThan(seen[i - 1]!);
          expect(seen.at(-1) ?? 2 * n).toBe(2 * n);
        },
      ),
    );
  });

  test("a call that continues a run counts what already happened; a planned run learns its size", () => {
    const t = new ProgressTracker([
      { stepId: "a", status: "completed" },
      { stepId: "b", status: "waiting_confirmation" },
    ]);
    expect(t.next({ type: "step_started", stepId: "b", data: {} } as unknown as RunEvent)).toEqual({
      progress: 3,
      total: 4,
      message: "step b started",
    });
    const planned = new ProgressTracker([]);
    expect(planned.next({ type: "planning_completed", data: { steps: 3 } } as unknown as RunEvent)).toBeUndefined();
    expect(
      planned.next({ type: "step_failed", stepId: "x", data: { error: { code: "TIMEOUT" } } } as unknown as RunEvent),
    ).toEqual({ progress: 2, total: 6, message: "step x failed (TIMEOUT)" });
  });
});

describe("elicitation", () => {
  test("accept approves, decline rejects, cancel cancels the run; a comment is kept", () => {
    expect(answerOf({ action: "accept", content: { comment: "  ok " } })).toEqual({
      kind: "decide",
      decision: "approve",
      comment: "ok",
    });
    expect(answerOf({ action: "accept" })).toEqual({ kind: "decide", decision: "approve" });
    expect(answerOf({ action: "decline" })).toEqual({ kind: "decide", decision: "reject" });
    expect(answerOf({ action: "cancel" })).toEqual({ kind: "cancel_run" });
  });

  test("the question shows the step, its preview and arguments, and asks for primitives only", () => {
    const q = confirmationQuestion("run_1", "ship it", {
      stepId: "pub",
      skillName: "x.publish",
      arguments: { title: "t" },
      preview: { willPublish: "t" },
      kind: "confirmation",
    });
    expect(q.message).toContain('Step "pub" (x.publish) of tool-chain run run_1');
    expect(q.message).toContain('Preview: {"willPublish":"t"}');
    expect(q.message).toContain('Arguments: {"title":"t"}');
    expect(q.requestedSchema).toEqual({
      type: "object",
      properties: { comment: expect.objectContaining({ type: "string" }) },
    });
  });
});

describe("tool results", () => {
  test("a run view becomes a result matching the output schema, and a summary naming what waits", () => {
    const r = toRunResult({
      runId: "r1",
      status: "waiting_confirmation",
      plan: { goal: "g", steps: [], onFailure: "skip_dependents", rollbackMode: "best_effort" },
      steps: [
        {
          stepId: "a",
          skillName: "core.pass",
          status: "completed",
          attempts: 1,
          output: { n: 1 },
          error: null,
        } as never,
        {
          stepId: "b",
          skillName: "x.publish",
          status: "waiting_confirmation",
          attempts: 0,
          output: null,
          error: null,
        } as never,
      ],
      pendingConfirmations: [
        {
          stepId: "b",
          skillName: "x.publish",
          arguments: { t: 1 },
          preview: { will: 1 },
          round: 0,
          kind: "confirmation",
        },
      ],
      result: null,
      error: null,
    });
    expect(ToolChainRunResultSchema.parse(r)).toEqual(r);
    expect(r.steps[0]).toEqual({
      stepId: "a",
      skillName: "core.pass",
      status: "completed",
      attempts: 1,
      output: { n: 1 },
    });
    const text = runSummary(r);
    expect(text).toContain("Run r1: waiting_confirmation (goal: g)");
    expect(text).toContain("- b (x.publish): approve to run it, reject to skip it");
    expect(text).toContain("confirm_tool_chain_step");
  });
});
