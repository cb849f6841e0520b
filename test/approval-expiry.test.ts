/**
 * Approval expiry and workspace default policies through the library, on the in-memory store and
 * Postgres (embedded, or the server with DATABASE_URL): a clock the test moves stands in for time
 * passing (the deadline is stored; the worker's sweep reads it). onExpiry "leave" reports and
 * keeps the wait decidable; the workspace default is the floor a skill and a step only tighten,
 * whoever wrote the plan; the configuration's errors name the field.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { z } from "zod";
import { defineSkill } from "../src/skills/contract.js";
import { parseApprovalDefaults, strictest } from "../src/kernel/approval-policy.js";
import { backends } from "./helpers/backends.js";
import { EffectLedger } from "./helpers/skills.js";
import { settle } from "./helpers/run.js";

const ledger = new EffectLedger();
const send = defineSkill({
  name: "test.send",
  description: "sends `text` after approval",
  input: z.object({ text: z.string() }),
  sideEffects: "external",
  idempotent: false,
  requiresConfirmation: true,
  async execute(args) {
    ledger.log.push(`send:${args.text}`);
    return { sent: args.text };
  },
});

const plan = (text: string, approval?: object) => ({
  steps: [{ stepId: "s", skillName: "test.send", arguments: { text }, ...(approval ? { approval } : {}) }],
});
const ada = { by: { kind: "user" as const, id: "ada" }, via: "rest" as const, roles: ["approver" as const] };

test("policy merging: a step's onExpiry leave cannot soften an expiry that rejects; a step may add a leaving expiry", () => {
  expect(strictest({ expiresAfterMs: 5_000 }, { onExpiry: "leave" })).toEqual({
    expiresAfterMs: 5_000,
    onExpiry: "reject",
  });
  expect(strictest({ roles: ["approver"] }, { expiresAfterMs: 9_000, onExpiry: "leave" })).toEqual({
    roles: ["approver"],
    expiresAfterMs: 9_000,
    onExpiry: "leave",
  });
  expect(strictest({ expiresAfterMs: 5_000, onExpiry: "leave" }, { expiresAfterMs: 2_000 })).toMatchObject({
    expiresAfterMs: 2_000,
    onExpiry: "reject",
  });
});

test("TOOLCHAIN_APPROVAL_DEFAULTS: errors name the field", () => {
  expect(parseApprovalDefaults('{"ops":{"quorum":2},"*":{"expiresAfterMs":60000}}')).toEqual({
    ops: { quorum: 2 },
    "*": { expiresAfterMs: 60_000 },
  });
  expect(() => parseApprovalDefaults('{"ops":{"quorum":0}}')).toThrow(
    /^Expected TOOLCHAIN_APPROVAL_DEFAULTS\.ops\.quorum to be valid: /,
  );
  expect(() => parseApprovalDefaults('{"ops":{"who":1}}')).toThrow(/TOOLCHAIN_APPROVAL_DEFAULTS\.ops/);
  expect(() => parseApprovalDefaults("[1")).toThrow(/^Expected TOOLCHAIN_APPROVAL_DEFAULTS to be JSON/);
  expect(parseApprovalDefaults(undefined)).toBeUndefined();
});

for (const backend of backends) {
  describe(`approval expiry and workspace defaults on ${backend.name}`, () => {
    let clock = Date.now();
    const opened = backend.open({
      skills: [send],
      env: { now: () => clock },
      approvalDefaults: {
        "*": { expiresAfterMs: 3_600_000, onExpiry: "leave" },
        ops: { roles: ["approver"], quorum: 2 },
      },
    });
    // opening Postgres costs 15-30 s at the load these machines see: in beforeAll, with room
    beforeAll(async () => void (await opened), 120_000);
    afterAll(async () => (await opened).close());
    beforeAll(() => void (ledger.log.length = 0)); // one ledger, one backend at a time

    test("onExpiry leave: reported once (approval_expired, outcome left), the wait stays decidable", async () => {
      const { runtime } = await opened;
      const v = (await settle(runtime.run(plan("left"), { runId: `leave-${backend.name}` }))).view;
      expect(v.status).toBe("waiting_confirmation");
      const row = await runtime.store.getRow(v.runId);
      expect(row!.pendingConfirmations[0]).toMatchObject({ stepId: "s", onExpiry: "leave" });
      expect(await runtime.expireApprovals()).toEqual([]); // not yet
      clock += 3_600_001;
      const swept = await runtime.expireApprovals();
      expect(swept).toEqual([expect.objectContaining({ runId: v.runId, stepId: "s", outcome: "left" })]);
      expect(await runtime.expireApprovals()).toEqual([]); // handled: never again
      const events = await runtime.events(v.runId);
      expect(events.filter((e) => e.type === "approval_expired").map((e) => e.data)).toEqual([
        expect.objectContaining({
          outcome: "left",
          onExpiry: "leave",
          by: { kind: "service", id: "toolchain:expiry", name: "approval expiry" },
          via: "system",
        }),
      ]);
      expect(ledger.log).not.toContain("send:left");
      const done = (await settle(await runtime.confirm(v.runId, { stepId: "s", decision: "approve" }, ada))).view;
      expect(done.status).toBe("completed");
      expect(ledger.log.filter((l) => l === "send:left")).toHaveLength(1);
    }, 120_000);

    test("a step's tighter expiry rejects; the run fails, the effect never happens", async () => {
      const { runtime } = await opened;
      const v = (await settle(runtime.run(plan("late", { expiresAfterMs: 1_000, onExpiry: "reject" })))).view;
      clock += 1_001;
      const [swept] = await runtime.expireApprovals();
      expect(swept).toMatchObject({ runId: v.runId, outcome: "rejected" });
      const end = (await settle(runtime.attach(v.runId))).view;
      expect(end.status).toBe("failed");
      expect(end.steps[0]!.decision).toMatchObject({
        decision: "reject",
        by: { id: "toolchain:expiry" },
        via: "system",
      });
      expect(ledger.log).not.toContain("send:late");
    }, 120_000);

    test("the workspace default is a floor: a model's plan cannot loosen it; people outside it are refused", async () => {
      const { runtime } = await opened;
      const v = (
        await settle(
          runtime.run(plan("ops", { quorum: 1 }), {
            workspaceId: "ops",
            author: { kind: "model", via: "planner" },
          }),
        )
      ).view;
      expect(v.status).toBe("waiting_confirmation");
      expect(runtime.policyOf({ plan: v.plan, workspaceId: "ops" }, v.pendingConfirmations[0]!)).toEqual({
        roles: ["approver"],
        quorum: 2,
        expiresAfterMs: 3_600_000,
        onExpiry: "leave",
      });
      // an agent (or a service key) is never an approver under a policy that names roles
      for (const by of [
        { kind: "agent" as const, id: "langchain-tools" },
        { kind: "service" as const, id: "key_ci" },
      ])
        await expect(
          runtime.confirm(v.runId, { stepId: "s", decision: "approve" }, { by, via: "agent" }),
        ).rejects.toMatchObject({
          code: "NOT_ALLOWED_TO_DECIDE",
          message: expect.stringContaining("approval policy lets only roles approver"),
        });
      const one = (await settle(await runtime.confirm(v.runId, { stepId: "s", decision: "approve" }, ada))).view;
      expect(one.status).toBe("waiting_confirmation"); // quorum 2 from the default
      const two = (
        await settle(
          await runtime.confirm(
            v.runId,
            { stepId: "s", decision: "approve" },
            { ...ada, by: { kind: "user", id: "grace" } },
          ),
        )
      ).view;
      expect(two.status).toBe("completed");
      expect(ledger.log.filter((l) => l === "send:ops")).toHaveLength(1);
    }, 120_000);
  });
}
