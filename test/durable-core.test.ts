/**
 * Issue 8 items 3-7, 10 (controls), 11 and issue 16 item 1, on every backend (memory, Postgres:
 * embedded or the server at DATABASE_URL): unstorable values, durable cancel, requests that
 * arrive while a drive finishes, retention of resumable runs, compensation timeout and abort,
 * reserved ids and bounded re-drives.
 */
import { afterEach, describe, expect, test } from "vitest";
import type { Runtime } from "../src/runtime/runtime.js";
import type { RunView } from "../src/kernel/run-view.js";
import { backends } from "./helpers/backends.js";
import { approvalSkill, EffectLedger, effectSkill, Gates, gateSkill } from "./helpers/skills.js";
import {
  HOSTILE_OUTPUTS,
  hangingUndoSkill,
  hostilePreviewSkill,
  hostileSkill,
  poisonSkill,
} from "./helpers/hostile-skills.js";

const until = async (pred: () => Promise<boolean> | boolean, ms = 20_000) => {
  const t0 = Date.now();
  while (!(await pred())) {
    if (Date.now() - t0 > ms) throw new Error("condition not reached");
    await new Promise((r) => setTimeout(r, 10));
  }
};
const codeOf = async (p: Promise<unknown> | (() => unknown)) => {
  try {
    await (typeof p === "function" ? p() : p);
  } catch (e) {
    return {
      code: (e as { code?: string }).code,
      message: (e as Error).message,
      details: (e as { details?: unknown }).details,
    };
  }
  return { code: "NO_ERROR" };
};
/** The run is settled for good: stored row, no lease, view and row agree. */
async function expectSettled(rt: Runtime, runId: string, status: string): Promise<RunView> {
  await until(async () => {
    const row = await rt.store.getRow(runId);
    return row?.status === status && !row.leaseOwner && !rt.activeRuns().includes(runId);
  });
  const view = await rt.getRun(runId);
  expect(view.status).toBe(status);
  return view;
}

/** Hold the next final sync of a drive (its graph has returned: the drive is finishing). */
function holdNextSync(rt: Runtime) {
  const orig = rt.store.sync.bind(rt.store);
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let entered = false;
  rt.store.sync = async (...args) => {
    rt.store.sync = orig;
    entered = true;
    await released;
    return orig(...args);
  };
  return { release, entered: () => entered };
}

describe.each(backends)(
  "durable core on $name",
  (backend) => {
    const closers: (() => Promise<void>)[] = [];
    afterEach(async () => {
      for (const c of closers.splice(0)) await c();
    });

    test("8.3 input that cannot be stored is refused naming the field; nothing is created", async () => {
      const o = await backend.open();
      closers.push(o.close);
      const rt = o.runtime;
      const plan = (value: unknown) => ({ steps: [{ stepId: "a", skillName: "core.pass", arguments: { value } }] });
      expect(await codeOf(() => rt.run(plan("x\u0000y")))).toMatchObject({
        code: "UNSUPPORTED_VALUE",
        details: { field: "plan.steps.0.arguments.value", reason: "nul_character" },
      });
      expect(await codeOf(() => rt.run(plan(1), { context: { a: ["ok", "\ud800"] } }))).toMatchObject({
        code: "UNSUPPORTED_VALUE",
        details: { field: "context.a.1", reason: "lone_surrogate" },
      });
      expect(await codeOf(() => rt.run(plan(1), { memory: { ["k\u0000"]: 1 } }))).toMatchObject({
        code: "UNSUPPORTED_VALUE",
        details: { reason: "nul_character" },
      });
      expect(await codeOf(() => rt.run(plan(1), { context: JSON.parse('{"__proto__": {"x": 1}}') }))).toMatchObject({
        code: "UNSUPPORTED_VALUE",
        details: { field: "context.__proto__", reason: "proto_key" },
      });
      expect(await codeOf(() => rt.run(plan(HOSTILE_OUTPUTS.deep!())))).toMatchObject({
        code: "UNSUPPORTED_VALUE",
        details: { reason: "too_deep" },
      });
      expect((await rt.store.listRuns({ workspaceId: "default", limit: 10 })).runs).toEqual([]);

      // decisions and cancels on a waiting run
      const ledger = new EffectLedger();
      rt.registry.register(approvalSkill(ledger));
      const view = await rt.run({ steps: [{ stepId: "pub", skillName: "test.publish", arguments: { title: "t" } }] })
        .result;
      expect(view.status).toBe("waiting_confirmation");
      const id = view.runId;
      expect(await codeOf(rt.confirm(id, { stepId: "pub", decision: "approve", comment: "ok\u0000" }))).toMatchObject({
        code: "UNSUPPORTED_VALUE",
        details: { field: "comment" },
      });
      expect(
        await codeOf(rt.confirm(id, { stepId: "pub", decision: "approve", arguments: { title: "\u0000" } })),
      ).toMatchObject({ code: "UNSUPPORTED_VALUE", details: { field: "arguments.title" } });
      expect(
        await codeOf(rt.confirm(id, { stepId: "pub", decision: "mark_done", output: { x: "\u0000" } })),
      ).toMatchObject({ code: "UNSUPPORTED_VALUE", details: { field: "output.x" } });
      expect(await codeOf(rt.confirm(id, { stepId: "pu\u0000b", decision: "approve" }))).toMatchObject({
        code: "UNSUPPORTED_VALUE",
        details: { field: "stepId" },
      });
      expect(await codeOf(rt.cancel(id, "stop\u0000"))).toMatchObject({
        code: "UNSUPPORTED_VALUE",
        details: { field: "reason" },
      });
      expect(await codeOf(rt.getRun(`${id}\u0000`))).toMatchObject({ code: "RUN_NOT_FOUND" });
      // nothing moved: the row and the view still wait, and a clean decision still works
      expect((await rt.store.getRow(id))!.status).toBe("waiting_confirmation");
      expect((await rt.getRun(id)).status).toBe("waiting_confirmation");
      expect((await (await rt.confirm(id, { stepId: "pub", decision: "approve" })).result).status).toBe("completed");
      expect(ledger.total()).toBe(1);
    });

    test("8.3 a skill's output, preview or error that cannot be stored: the step fails with a stable code, the run settles", async () => {
      const calls = { n: 0 };
      const o = await backend.open({ skills: [hostileSkill(calls), hostilePreviewSkill()] });
      closers.push(o.close);
      const rt = o.runtime;
      for (const kind of Object.keys(HOSTILE_OUTPUTS)) {
        const v = await rt.run({
          steps: [{ stepId: "h", skillName: "test.hostile", arguments: { kind }, retry: { maxAttempts: 3 } }],
        }).result;
        const settled = await expectSettled(rt, v.runId, "failed");
        expect(settled.steps[0]!.error, kind).toMatchObject({ code: "UNSUPPORTED_VALUE" });
        expect(settled.steps[0]!.attempts, kind).toBe(1); // deterministic: not retried
        expect((await rt.events(v.runId)).at(-1)!.type).toBe("run_failed");
      }
      // an error text with NUL: stored visibly escaped, the code kept
      const e = await rt.run({ steps: [{ stepId: "e", skillName: "test.hostile", arguments: { failWith: "bad" } }] })
        .result;
      const ev = await expectSettled(rt, e.runId, "failed");
      expect(ev.steps[0]!.error).toMatchObject({ code: "INVALID_INPUT", message: "bad\\u0000text" });
      const stored = await rt.store.getView(e.runId);
      expect(stored!.steps[0]!.error).toMatchObject({ code: "INVALID_INPUT", message: "bad\\u0000text" });
      // a preview with NUL: the step fails before waiting, nothing is left pending
      const p = await rt.run({ steps: [{ stepId: "p", skillName: "test.hostile_preview", arguments: { title: "t" } }] })
        .result;
      const pv = await expectSettled(rt, p.runId, "failed");
      expect(pv.steps[0]!.error).toMatchObject({ code: "UNSUPPORTED_VALUE", details: { field: "preview.title" } });
      expect(pv.pendingConfirmations).toEqual([]);
      // storable oddities are kept exactly: big numbers, long strings, emoji (a surrogate pair)
      const fine = {
        big: 1.7976931348623157e308,
        neg: -12345678901234567890,
        s: "é😀".repeat(10_000),
        nested: [[[{ a: null }]]],
      };
      const f = await rt.run({ steps: [{ stepId: "f", skillName: "test.hostile", arguments: { value: fine } }] })
        .result;
      expect(f.status).toBe("completed");
      expect((await rt.getRun(f.runId)).steps[0]!.output).toEqual(fine);
    });

    test("16.1 step ids and saveResultAs keys naming Object.prototype members are refused; such context keys are plain data", async () => {
      const o = await backend.open();
      closers.push(o.close);
      const rt = o.runtime;
      for (const id of ["constructor", "toString", "valueOf", "hasOwnProperty", "isPrototypeOf"]) {
        expect(await codeOf(() => rt.run({ steps: [{ stepId: id, skillName: "core.pass" }] })), id).toMatchObject({
          code: "RESERVED_ID",
        });
        expect(
          await codeOf(() => rt.run({ steps: [{ stepId: "a", skillName: "core.pass", saveResultAs: id }] })),
          id,
        ).toMatchObject({ code: "RESERVED_ID" });
      }
      expect(
        await codeOf(() => rt.run({ steps: [{ stepId: "a", skillName: "core.pass", saveResultAs: "__proto__" }] })),
      ).toMatchObject({ code: "RESERVED_ID" });
      expect(await codeOf(() => rt.run({ steps: [{ stepId: "__proto__", skillName: "core.pass" }] }))).toMatchObject({
        code: "PLAN_INVALID",
      });
      const context = { constructor: "c", toString: "t", valueOf: 1, hasOwnProperty: false };
      const v = await rt.run(
        { steps: [{ stepId: "a", skillName: "core.pass", arguments: { value: { $ref: "context.toString" } } }] },
        { context },
      ).result;
      expect(v.status).toBe("completed");
      expect(v.steps[0]!.output).toBe("t");
      expect((await rt.getRun(v.runId)).context).toEqual(context);
      expect((await rt.store.getRow(v.runId))!.context).toEqual(context);
    });

    test("16.1 a drive that throws is recorded against its run, re-driven a bounded number of times with backoff, then failed", async () => {
      const calls = { n: 0 };
      const o = await backend.open({
        skills: [poisonSkill(calls)],
        driveRetry: { maxFailures: 3, initialMs: 20, maxMs: 40 },
      });
      closers.push(o.close);
      const rt = o.runtime;
      const v = await rt.run({ steps: [{ stepId: "p", skillName: "test.poison" }] }).result;
      expect(v.status).toBe("failed");
      expect(v.error).toMatchObject({ code: "DRIVE_FAILED" });
      expect(v.error!.message).toContain("serialKey exploded");
      const row = (await rt.store.getRow(v.runId))!;
      expect(row).toMatchObject({ status: "failed", leaseOwner: null, driveFailures: 3 });
      const n = calls.n;
      expect(n).toBe(3);
      // nothing picks it up again
      expect(await rt.recover()).toEqual([]);
      expect((await rt.events(v.runId)).at(-1)).toMatchObject({ type: "run_failed" });
      expect(calls.n).toBe(n);
      expect(rt.env.controls.size()).toBe(0);
    });

    test("8.4 a cancel sent to a process that does not execute the run reaches the executing one; nothing stale is left behind", async () => {
      const gates = new Gates();
      const gateCalls = new Map<string, number>();
      const ledger = new EffectLedger();
      const pair = await backend.openPair({
        skills: [gateSkill(gates, gateCalls), approvalSkill(ledger)],
        decisionPollMs: 50,
      });
      closers.push(pair.close);
      const { a, b } = pair;
      const h = a.run({
        steps: [
          { stepId: "slow", skillName: "test.gate", arguments: { gate: "g" } },
          { stepId: "pub", skillName: "test.publish", dependsOn: ["slow"], arguments: { title: "t" } },
        ],
      });
      await gates.untilEntered("g");
      const cancelled = await (await b.cancel(h.runId, "stop it")).result;
      expect(cancelled.status).toBe("cancelled");
      expect((await h.result).status).toBe("cancelled");
      gates.open("g");
      const view = await expectSettled(b, h.runId, "cancelled");
      expect(view.steps.map((s) => s.status)).toEqual(["cancelled", "cancelled"]);
      expect(view.error).toMatchObject({ code: "CANCELLED", message: "stop it" });
      expect(ledger.total()).toBe(0);
      // no process keeps a control for a run it does not execute
      expect(a.env.controls.size()).toBe(0);
      expect(b.env.controls.size()).toBe(0);

      // a cancel that found no executor does not linger: a later approval in that process approves
      const w = await b.run({ steps: [{ stepId: "pub", skillName: "test.publish", arguments: { title: "later" } }] })
        .result;
      expect(w.status).toBe("waiting_confirmation");
      const done = await (await b.confirm(w.runId, { stepId: "pub", decision: "approve" })).result;
      expect(done.status).toBe("completed");
      expect(ledger.total()).toBe(1);
    });

    test("8.6 cancelling a queued run ends it cancelled without executing anything", async () => {
      const ledger = new EffectLedger();
      const o = await backend.open({ skills: [effectSkill(ledger)] });
      closers.push(o.close);
      const rt = o.runtime;
      const { runId } = await rt.submit({
        steps: [{ stepId: "w", skillName: "test.effect", arguments: { label: "w" } }],
      });
      expect((await rt.getRun(runId)).status).toBe("queued");
      const v = await (await rt.cancel(runId, "not needed")).result;
      expect(v.status).toBe("cancelled");
      await expectSettled(rt, runId, "cancelled");
      expect(await rt.recover()).toEqual([]);
      await rt.drain();
      expect(ledger.total()).toBe(0);
    });

    test("8.5 a cancel or a decision that arrives while the local drive is finishing is applied; a repeated confirm returns", async () => {
      const ledger = new EffectLedger();
      const o = await backend.open({ skills: [approvalSkill(ledger)] });
      closers.push(o.close);
      const rt = o.runtime;
      const two = {
        steps: [
          { stepId: "p1", skillName: "test.publish", arguments: { title: "one" } },
          { stepId: "p2", skillName: "test.publish", arguments: { title: "two" } },
        ],
      };

      // a decision for p2 while the drive that applied p1 is finishing
      const w = await rt.run(two).result;
      expect(w.status).toBe("waiting_confirmation");
      const hold = holdNextSync(rt);
      const first = await rt.confirm(w.runId, { stepId: "p1", decision: "approve" });
      await until(hold.entered);
      const second = await rt.confirm(w.runId, { stepId: "p2", decision: "approve" });
      hold.release();
      expect((await first.result).status).toBe("completed");
      expect((await second.result).status).toBe("completed");
      // the same decision again answers with the current state at once
      expect((await (await rt.confirm(w.runId, { stepId: "p2", decision: "approve" })).result).status).toBe(
        "completed",
      );
      expect([...ledger.effects.values()]).toEqual([1, 1]);

      // a cancel while the drive is finishing
      const w2 = await rt.run(two).result;
      const hold2 = holdNextSync(rt);
      const c1 = await rt.confirm(w2.runId, { stepId: "p1", decision: "approve" });
      await until(hold2.entered);
      const cancel = await rt.cancel(w2.runId, "late cancel");
      hold2.release();
      expect((await cancel.result).status).toBe("cancelled");
      expect((await c1.result).status).toBe("cancelled");
      const final = await expectSettled(rt, w2.runId, "cancelled");
      expect(final.steps.map((s) => s.status)).toEqual(["rolled_back", "cancelled"]);
      expect(rt.env.controls.size()).toBe(0);
    });

    test("8.7 + 8.5 a strict rollback waiting for an operator is never pruned; an operator decision during the drive's end is applied", async () => {
      const ledger = new EffectLedger();
      const o = await backend.open({
        skills: [
          effectSkill(ledger, { compensationFailures: 2 }),
          effectSkill(ledger, { name: "test.effect2", compensationFailures: 2 }),
        ],
      });
      closers.push(o.close);
      const rt = o.runtime;
      const plan = (skillName: string) => ({
        rollbackMode: "strict",
        onFailure: "fail_fast",
        steps: [
          {
            stepId: "w",
            skillName,
            arguments: { label: skillName },
            retry: { maxAttempts: 2, backoff: { kind: "fixed", initialMs: 1 } },
          },
          { stepId: "f", skillName: "core.fail", dependsOn: ["w"], retry: { maxAttempts: 1 } },
        ],
      });
      const v = await rt.run(plan("test.effect")).result;
      expect(v.status).toBe("rollback_failed");
      expect(v.pendingConfirmations).toMatchObject([{ stepId: "w", kind: "compensation" }]);
      // retention: terminal-looking but resumable: its checkpoint stays
      expect(await rt.pruneCheckpoints({ olderThanMs: -60_000 })).toEqual([]);
      const done = await (await rt.confirm(v.runId, { stepId: "w", decision: "approve" })).result;
      expect(done.status).toBe("rolled_back");
      // once finished it is pruned, and getRun answers from the history
      expect(await rt.pruneCheckpoints({ olderThanMs: -60_000 })).toEqual([v.runId]);
      expect((await rt.getRun(v.runId)).status).toBe("rolled_back");

      // the operator answers while the drive that blocked is still finishing
      const hold = holdNextSync(rt);
      const h = rt.run(plan("test.effect2"));
      await until(hold.entered);
      const answer = await rt.confirm(h.runId, { stepId: "w", decision: "approve" });
      hold.release();
      expect((await answer.result).status).toBe("rolled_back");
      expect((await h.result).status).toBe("rolled_back");
      await expectSettled(rt, h.runId, "rolled_back");
      expect([...ledger.compensations.values()]).toEqual([1, 1]);
    });

    test("8.11 a hung compensation times out; a cancel reaches a compensation in flight", async () => {
      const undos = { started: 0, finished: 0 };
      const o = await backend.open({ skills: [hangingUndoSkill(undos)], env: { compensationTimeoutMs: 3_600_000 } });
      closers.push(o.close);
      const rt = o.runtime;
      // ignores its signal: abandoned after the step's timeoutMs, per attempt (retried per policy)
      const v = await rt.run({
        onFailure: "fail_fast",
        steps: [
          {
            stepId: "w",
            skillName: "test.hanging_undo",
            arguments: { label: "w" },
            timeoutMs: 150,
            retry: { maxAttempts: 2, backoff: { kind: "fixed", initialMs: 1 } },
          },
          { stepId: "f", skillName: "core.fail", dependsOn: ["w"], retry: { maxAttempts: 1 } },
        ],
      }).result;
      expect(v.status).toBe("rollback_failed");
      expect(v.steps[0]!.rollback).toMatchObject({ status: "rollback_failed", error: { code: "TIMEOUT" } });
      expect(undos.started).toBe(2);
      await expectSettled(rt, v.runId, "rollback_failed");

      // honours its signal, no timeout in sight: a cancel stops it and the walk
      const h = rt.run({
        onFailure: "fail_fast",
        steps: [
          { stepId: "w", skillName: "test.hanging_undo", arguments: { label: "w2", honourSignal: true } },
          { stepId: "f", skillName: "core.fail", dependsOn: ["w"], retry: { maxAttempts: 1 } },
        ],
      });
      await until(() => undos.started === 3);
      await rt.cancel(h.runId, "stop the rollback");
      const c = await h.result;
      expect(c.status).toBe("rollback_failed");
      expect(c.steps[0]!.rollback).toMatchObject({ status: "rollback_failed", error: { code: "CANCELLED" } });
      expect(c.pendingConfirmations).toEqual([]);
      await expectSettled(rt, h.runId, "rollback_failed");
      expect(rt.env.controls.size()).toBe(0);
    });
    // each test opens its own database (embedded PGlite: slow to open on a loaded machine)
  },
  120_000,
);
