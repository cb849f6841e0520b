/**
 * Human confirmation as a durable suspend/resume point (LangGraph interrupt + checkpointer).
 */
import { afterEach, describe, expect, test } from "vitest";
import type { RunEvent, RunView } from "../src/index.js";
import { backends } from "./helpers/backends.js";
import { approvalSkill, EffectLedger, Gates, gateSkill } from "./helpers/skills.js";
import { settle, stepOf } from "./helpers/run.js";
import { waitFor } from "./helpers/wait.js";

const step = stepOf;

describe.each(backends)("confirmation on $name", (backend) => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
  });
  async function setup() {
    const ledger = new EffectLedger();
    const gates = new Gates();
    const calls = new Map<string, number>();
    const o = await backend.open({ skills: [approvalSkill(ledger), gateSkill(gates, calls)] });
    closers.push(async () => {
      for (const g of ["slow", "prep"]) gates.open(g);
      await o.close();
    });
    return { rt: o.runtime, ledger, gates, calls };
  }

  test("preview first, then suspend; approve resumes the same run without re-running completed steps", async () => {
    const { rt, ledger, calls, gates } = await setup();
    gates.open("prep");
    const first = await settle(
      rt.run({
        steps: [
          { stepId: "prep", skillName: "test.gate", arguments: { gate: "prep", value: "Q3 report" } },
          {
            stepId: "pub",
            skillName: "test.publish",
            dependsOn: ["prep"],
            arguments: { title: { $ref: "steps.prep" } },
          },
        ],
      }),
    );
    expect(first.view.status).toBe("waiting_confirmation");
    expect(first.view.pendingConfirmations).toEqual([
      {
        stepId: "pub",
        skillName: "test.publish",
        arguments: { title: "Q3 report" },
        preview: { willPublish: "Q3 report" },
        round: 0,
        kind: "confirmation",
      },
    ]);
    expect(ledger.total()).toBe(0);
    expect(first.events.at(-1)!.type).toBe("run_waiting_confirmation");

    const second = await settle(await rt.confirm(first.view.runId, { stepId: "pub", decision: "approve" }));
    expect(second.view.runId).toBe(first.view.runId);
    expect(second.view.status).toBe("completed");
    expect(step(second.view, "pub").output).toEqual({ published: "Q3 report" });
    expect(ledger.total()).toBe(1);
    expect(calls.get("prep")).toBe(1);
    // numbering continues across the resume
    expect(second.events[0]!.seq).toBe(first.events.at(-1)!.seq + 1);
    expect(second.events.map((e) => e.type)).toEqual([
      "step_confirmed",
      "step_started",
      "step_completed",
      "run_completed",
    ]);
  });

  test("approve with edited arguments (validated again); invalid edits are refused and change nothing", async () => {
    const { rt, ledger } = await setup();
    const { view } = await settle(
      rt.run({ steps: [{ stepId: "pub", skillName: "test.publish", arguments: { title: "draft" } }] }),
    );
    await expect(
      rt.confirm(view.runId, { stepId: "pub", decision: "approve", arguments: { title: "" } }),
    ).rejects.toMatchObject({
      code: "INVALID_ARGUMENTS",
      message: expect.stringContaining("edited arguments do not match test.publish"),
    });
    expect((await rt.getRun(view.runId)).status).toBe("waiting_confirmation");
    const done = await settle(
      await rt.confirm(view.runId, { stepId: "pub", decision: "approve", arguments: { title: "final" } }),
    );
    expect(step(done.view, "pub")).toMatchObject({
      status: "completed",
      input: { title: "final" },
      output: { published: "final" },
    });
    expect(ledger.log).toEqual(["publish:final"]);
  });

  test("reject fails the step with REJECTED and skips its dependents", async () => {
    const { rt, ledger } = await setup();
    const { view } = await settle(
      rt.run({
        steps: [
          { stepId: "pub", skillName: "test.publish", arguments: { title: "x" } },
          { stepId: "after", skillName: "core.pass", dependsOn: ["pub"], arguments: { value: 1 } },
          { stepId: "indep", skillName: "core.pass", arguments: { value: 2 } },
        ],
      }),
    );
    const done = await settle(await rt.confirm(view.runId, { stepId: "pub", decision: "reject", comment: "not now" }));
    expect(done.view.status).toBe("failed");
    expect(step(done.view, "pub")).toMatchObject({
      status: "failed",
      error: { code: "REJECTED", message: "rejected: not now" },
    });
    expect(step(done.view, "after").status).toBe("skipped");
    expect(step(done.view, "indep").status).toBe("completed");
    expect(ledger.total()).toBe(0);
  });

  test("a decision for a step that is not waiting is refused; the same decision twice resumes once", async () => {
    const { rt, ledger } = await setup();
    const { view } = await settle(
      rt.run({
        steps: [
          { stepId: "pub", skillName: "test.publish", arguments: { title: "x" } },
          { stepId: "other", skillName: "core.pass", arguments: { value: 1 } },
        ],
      }),
    );
    await expect(rt.confirm(view.runId, { stepId: "other", decision: "approve" })).rejects.toMatchObject({
      code: "CONFIRMATION_NOT_PENDING",
      message: `step "other" of run ${view.runId} is not waiting for confirmation`,
    });
    await expect(rt.confirm(view.runId, { stepId: "nope", decision: "approve" })).rejects.toMatchObject({
      code: "CONFIRMATION_NOT_PENDING",
    });
    await expect(rt.confirm(view.runId, { stepId: "pub", decision: "maybe" as never })).rejects.toMatchObject({
      code: "INVALID_DECISION",
    });
    await expect(rt.confirm("no-such-run", { stepId: "pub", decision: "approve" })).rejects.toMatchObject({
      code: "RUN_NOT_FOUND",
    });
    const once = await settle(await rt.confirm(view.runId, { stepId: "pub", decision: "approve" }));
    expect(once.view.status).toBe("completed");
    const twice = await settle(await rt.confirm(view.runId, { stepId: "pub", decision: "approve" }));
    expect(twice.view.status).toBe("completed");
    expect(twice.events).toEqual([]);
    expect(ledger.total()).toBe(1);
    await expect(rt.confirm(view.runId, { stepId: "pub", decision: "reject" })).rejects.toMatchObject({
      code: "CONFIRMATION_NOT_PENDING",
    });
  });

  test("parallel confirmations are answered independently, in either order", async () => {
    const { rt, ledger } = await setup();
    const { view } = await settle(
      rt.run({
        steps: [
          { stepId: "p1", skillName: "test.publish", arguments: { title: "one" } },
          { stepId: "p2", skillName: "test.publish", arguments: { title: "two" } },
          {
            stepId: "after2",
            skillName: "core.pass",
            dependsOn: ["p2"],
            arguments: { value: { $ref: "steps.p2.published" } },
          },
        ],
      }),
    );
    expect(view.pendingConfirmations.map((p) => p.stepId)).toEqual(["p1", "p2"]);
    const r2 = await settle(await rt.confirm(view.runId, { stepId: "p2", decision: "approve" }));
    // p2 and its successor ran while p1 still waits
    expect(r2.view.status).toBe("waiting_confirmation");
    expect(step(r2.view, "after2")).toMatchObject({ status: "completed", output: "two" });
    expect(r2.view.pendingConfirmations.map((p) => p.stepId)).toEqual(["p1"]);
    const r1 = await settle(await rt.confirm(view.runId, { stepId: "p1", decision: "approve" }));
    expect(r1.view.status).toBe("completed");
    expect(ledger.log).toEqual(["publish:two", "publish:one"]);
    expect([...ledger.effects.values()]).toEqual([1, 1]);
  });

  test("a decision that arrives while other branches still run is applied at once", async () => {
    const { rt, ledger, gates } = await setup();
    const h = rt.run({
      steps: [
        { stepId: "slow", skillName: "test.gate", arguments: { gate: "slow" } },
        { stepId: "pub", skillName: "test.publish", arguments: { title: "now" } },
      ],
    });
    const events: RunEvent[] = [];
    const reading = (async () => {
      for await (const e of h.events) events.push(e);
    })();
    await waitFor(() => events.some((e) => e.type === "step_waiting_confirmation"), {
      what: "pub waiting for confirmation",
    });
    const again = await rt.confirm(h.runId, { stepId: "pub", decision: "approve" });
    expect(again.runId).toBe(h.runId);
    await waitFor(() => events.some((e) => e.type === "step_completed" && e.stepId === "pub"), {
      what: "pub completed while slow still runs",
    });
    expect(ledger.log).toEqual(["publish:now"]);
    expect(events.some((e) => e.type === "step_completed" && e.stepId === "slow")).toBe(false);
    gates.open("slow");
    const view = await h.result;
    await reading;
    expect(view.status).toBe("completed");
    expect(events.some((e) => e.type === "run_waiting_confirmation")).toBe(false);
  });

  test("cancel while suspended compensates what completed", async () => {
    const { rt, ledger } = await setup();
    const { view } = await settle(
      rt.run({
        steps: [
          { stepId: "p1", skillName: "test.publish", arguments: { title: "one" } },
          { stepId: "p2", skillName: "test.publish", dependsOn: ["p1"], arguments: { title: "two" } },
        ],
      }),
    );
    await settle(await rt.confirm(view.runId, { stepId: "p1", decision: "approve" }));
    const c = await settle(await rt.cancel(view.runId, "stop"));
    expect(c.view.status).toBe("cancelled");
    expect(step(c.view, "p2").status).toBe("cancelled");
    expect(step(c.view, "p1").status).toBe("rolled_back");
    expect(ledger.log).toEqual(["publish:one", "unpublish:one"]);
  });
});
