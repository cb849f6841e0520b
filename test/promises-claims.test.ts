/**
 * README promises tightened (issue 22):
 * - workers claim runs fairly across workspaces: the oldest runnable run of every workspace
 *   first, then the second oldest of each, … (on memory and on Postgres, the exact order);
 * - the API's `round`: each pending confirmation carries it; a confirm naming a wait that is
 *   over is refused with 409 CONFIRMATION_NOT_PENDING and changes nothing; the current round applies;
 * - a decision that arrives while the run executes other branches on another process is picked up
 *   by that process within `decisionPollMs` (not before its poll, and without waiting for the branch).
 */
import { afterEach, describe, expect, test, vi } from "vitest";
import { backends, memoryBackend } from "./helpers/backends.js";
import { call, newKey, serveApi } from "./helpers/api.js";
import { approvalSkill, EffectLedger, Gates, gateSkill } from "./helpers/skills.js";
import { waitFor } from "./helpers/wait.js";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

describe.each(backends)("fair claiming on $name", (backend) => {
  test("one claim at a time takes the oldest run of each workspace in turn, then the next oldest of each", async () => {
    const o = await backend.open();
    closers.push(o.close);
    const rt = o.runtime;
    const plan = { steps: [{ stepId: "s", skillName: "core.pass", arguments: { value: 1 } }] };
    const ids: Record<string, string> = {};
    // workspace A has a backlog of three, submitted before B's two and C's one
    for (const [name, ws] of [
      ["a1", "ws-a"],
      ["a2", "ws-a"],
      ["a3", "ws-a"],
      ["b1", "ws-b"],
      ["b2", "ws-b"],
      ["c1", "ws-c"],
    ] as const)
      ids[name] = (await rt.submit(plan, { workspaceId: ws })).runId;
    const byId = new Map(Object.entries(ids).map(([k, v]) => [v, k]));
    const order: string[] = [];
    for (let i = 0; i < 7; i++)
      order.push(...(await rt.store.claimRunnable("a-worker", 60_000, 1)).map((id) => byId.get(id)!));
    expect(order).toEqual(["a1", "b1", "c1", "a2", "b2", "a3"]);
  }, 120_000);
});

describe("the API's round field", () => {
  test("a confirm for a wait that is over is refused (409) and changes nothing; the current round applies", async () => {
    const ledger = new EffectLedger();
    const o = await memoryBackend.open({ skills: [approvalSkill(ledger)] });
    closers.push(o.close);
    const api = await serveApi(o.runtime, undefined);
    closers.unshift(api.close);
    const key = await newKey(api.access, "ws-round");
    // p waits (round 0); approved, its skill fails and its fallback skill asks in turn (a later round of p)
    const r = await call(api.url, "POST", "/api/tool-chains/run", {
      key,
      body: {
        plan: {
          steps: [
            {
              stepId: "p",
              skillName: "core.fail",
              requireConfirmation: true,
              retry: { maxAttempts: 1 },
              fallback: { skillName: "test.publish", arguments: { title: "fallback" } },
            },
          ],
        },
      },
    });
    const runId = r.body.runId as string;
    expect(r.body.pendingConfirmations).toEqual([expect.objectContaining({ stepId: "p", round: 0 })]);
    const first = await call(api.url, "POST", `/api/tool-chains/runs/${runId}/confirm`, {
      key,
      body: { stepId: "p", decision: "approve", round: 0 },
    });
    expect(first.status).toBe(200);
    const [wait] = first.body.pendingConfirmations;
    expect(wait).toMatchObject({ stepId: "p", fallback: true, skillName: "test.publish" });
    expect(wait.round).toBeGreaterThan(0);
    const events = async () =>
      (await call(api.url, "GET", `/api/tool-chains/runs/${runId}/events`, { key })).body.events.length;
    const before = await events();
    // a second click of the first question (round 0): refused, never applied to the fallback's wait
    const stale = await call(api.url, "POST", `/api/tool-chains/runs/${runId}/confirm`, {
      key,
      body: { stepId: "p", decision: "reject", round: 0 },
    });
    expect(stale.status).toBe(409);
    expect(stale.body.error.code).toBe("CONFIRMATION_NOT_PENDING");
    expect(await events()).toBe(before);
    expect((await call(api.url, "GET", `/api/tool-chains/runs/${runId}`, { key })).body.pendingConfirmations).toEqual([
      wait,
    ]);
    // the round shown applies
    const done = await call(api.url, "POST", `/api/tool-chains/runs/${runId}/confirm`, {
      key,
      body: { stepId: "p", decision: "approve", round: wait.round },
    });
    expect([done.status, done.body.status]).toEqual([200, "completed"]);
    expect(done.body.steps[0]).toMatchObject({ usedFallback: true, output: { published: "fallback" } });
    expect(ledger.effects.get(`${runId}:p:fallback`)).toBe(1);
  });
});

describe("decision pickup", () => {
  test("a decision recorded by another process is applied by the executing one at its next decision poll, while its other branch still runs", async () => {
    // only intervals are faked: the executing process's decision poll runs when the test says
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const gates = new Gates();
    const ledger = new EffectLedger();
    try {
      const pair = await memoryBackend.openPair({
        skills: [gateSkill(gates, new Map()), approvalSkill(ledger)],
        decisionPollMs: 1_000,
      });
      closers.push(async () => {
        gates.open("g");
        vi.useRealTimers();
        await pair.close();
      });
      const h = pair.a.run({
        steps: [
          { stepId: "slow", skillName: "test.gate", arguments: { gate: "g" } },
          { stepId: "p", skillName: "test.publish", arguments: { title: "t" } },
        ],
      });
      await gates.untilEntered("g");
      await waitFor(async () => (await pair.a.store.getRow(h.runId))!.pendingConfirmations.length === 1, {
        what: "p waits",
      });
      const decided = await pair.b.confirm(h.runId, { stepId: "p", decision: "approve" });
      decided.result.catch(() => undefined);
      await waitFor(async () => (await pair.a.store.unappliedDecisions(h.runId)).length === 1, {
        what: "the decision recorded",
      });
      // not before the poll: a millisecond short of decisionPollMs nothing has happened
      await vi.advanceTimersByTimeAsync(999);
      for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
      expect(ledger.effects.get(`${h.runId}:p`)).toBeUndefined();
      // the poll: p runs on the executing process, its other branch still blocked
      await vi.advanceTimersByTimeAsync(1);
      await waitFor(() => ledger.effects.get(`${h.runId}:p`) === 1, { what: "p executed after the poll" });
      expect(pair.a.activeRuns()).toContain(h.runId);
      expect(pair.b.activeRuns()).not.toContain(h.runId);
      gates.open("g");
      const v = await h.result;
      expect(v.status).toBe("completed");
      expect(ledger.effects.get(`${h.runId}:p`)).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });
});
