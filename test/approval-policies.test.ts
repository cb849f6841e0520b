/**
 * Approval policies over REST with personal keys, real HTTP and Postgres, two API processes on
 * one database: the requester cannot approve, a service key or a role outside the policy is
 * refused, a quorum of 2 is counted across the two processes (partial approvals are durable rows,
 * an exact repeat counts once, a different second vote is refused), one reject rejects, a plan
 * step tightens the skill's policy and cannot loosen it, and the inbox lists what I may decide.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { z } from "zod";
import { defineSkill } from "../src/skills/contract.js";
import { postgresBackend } from "./helpers/backends.js";
import { call, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { EffectLedger } from "./helpers/skills.js";
import type { KeyUser } from "../src/store/access-store.js";

const WS = "ws-policy";
const ledger = new EffectLedger();

/** An irreversible deploy: two approvers, never the requester. */
const deploy = defineSkill({
  name: "test.deploy",
  description: "deploys `version` after two approvals",
  input: z.object({ version: z.string().min(1) }),
  sideEffects: "external",
  idempotent: false,
  requiresConfirmation: true,
  approval: { roles: ["approver", "admin"], quorum: 2, allowRequester: false },
  preview: (a: { version: string }) => ({ willDeploy: a.version }),
  async execute(args) {
    ledger.log.push(`deploy:${args.version}`);
    return { deployed: args.version };
  },
});
/** Asks, with no policy of its own: a plan step may add one. */
const note = defineSkill({
  name: "test.note",
  description: "writes a note after approval",
  input: z.object({ text: z.string() }),
  sideEffects: "external",
  idempotent: false,
  requiresConfirmation: true,
  async execute(args) {
    ledger.log.push(`note:${args.text}`);
    return { noted: args.text };
  },
});

const deployPlan = (version: string, approval?: unknown) => ({
  steps: [{ stepId: "deploy", skillName: "test.deploy", arguments: { version }, ...(approval ? { approval } : {}) }],
});

describe(`approval policies over REST on ${postgresBackend.name}`, () => {
  let a: ApiUnderTest;
  let b: ApiUnderTest;
  let close: () => Promise<void>;
  const keys: Record<string, string> = {};

  beforeAll(async () => {
    const pair = await postgresBackend.openPair({ skills: [deploy, note] });
    a = await serveApi(pair.a, pair.db);
    b = await serveApi(pair.b, pair.db, { access: a.access });
    await a.access.ensureWorkspace(WS);
    const personal = async (name: string, user: KeyUser) => (keys[name] = (await a.access.createKey(WS, { user })).key);
    await personal("ada", { id: "ada", roles: ["operator", "approver"] });
    await personal("ada2", { id: "ada", name: "Ada (laptop)", roles: ["approver"] }); // another key of the same person
    await personal("grace", { id: "grace", roles: ["approver"] });
    await personal("linus", { id: "linus", roles: ["approver"] });
    await personal("olga", { id: "olga", roles: ["operator"] });
    keys.service = (await a.access.createKey(WS, { label: "ci" })).key;
    close = async () => {
      await a.close();
      await b.close();
      await pair.close();
    };
  });
  afterAll(() => close?.());
  const on = (api: ApiUnderTest, who: string, method: "GET" | "POST", path: string, body?: unknown) =>
    call(api.url, method, path, { key: keys[who], body });
  const decide = (
    api: ApiUnderTest,
    who: string,
    runId: string,
    decision: string,
    extra: Record<string, unknown> = {},
  ) => on(api, who, "POST", `/api/tool-chains/runs/${runId}/confirm`, { stepId: "deploy", decision, ...extra });
  const start = async (version: string, approval?: unknown) => {
    const r = await on(a, "ada", "POST", "/api/tool-chains/run", { plan: deployPlan(version, approval) });
    expect(r.body.status).toBe("waiting_confirmation");
    return r.body.runId as string;
  };

  test("quorum 2 across two processes: self-approval refused, outsiders refused, a repeat counted once, the second approver completes it", async () => {
    const runId = await start("v1");
    // the requester, with any of their keys
    for (const k of ["ada", "ada2"]) {
      const self = await decide(a, k, runId, "approve");
      expect([self.status, self.body.error.code]).toEqual([409, "REQUESTER_CANNOT_APPROVE"]);
      expect(self.body.error.message).toContain("allowRequester");
    }
    // a service key and an operator are not in the policy
    for (const k of ["service", "olga"]) {
      const r = await decide(a, k, runId, "approve");
      expect(k === "olga" ? r.body.error.code : [r.status, r.body.error.code]).toEqual(
        k === "olga" ? "ROLE_NOT_ALLOWED" : [403, "NOT_ALLOWED_TO_DECIDE"],
      );
    }

    // first approval on process A: durable, the step still waits
    const first = await decide(a, "grace", runId, "approve", { comment: "looks fine" });
    expect(first.status).toBe(200);
    expect(first.body.status).toBe("waiting_confirmation");
    expect(first.body.pendingConfirmations[0].approval).toMatchObject({
      policy: { roles: ["approver", "admin"], quorum: 2, allowRequester: false },
      required: 2,
      given: [{ by: { kind: "user", id: "grace" }, decision: "approve", via: "rest", comment: "looks fine" }],
      youMayDecide: false,
    });
    // an exact repeat answers ok and counts once; a different second vote is refused
    const again = await decide(b, "grace", runId, "approve", { comment: "looks fine" });
    expect([again.status, again.body.status, again.body.pendingConfirmations[0].approval.given.length]).toEqual([
      200,
      "waiting_confirmation",
      1,
    ]);
    const changed = await decide(b, "grace", runId, "reject");
    expect([changed.status, changed.body.error.code]).toEqual([409, "CONFIRMATION_NOT_PENDING"]);

    // what each person sees: linus may decide, grace has, ada (requester) may not
    const seen = await on(b, "linus", "GET", `/api/tool-chains/runs/${runId}`);
    expect(seen.body.pendingConfirmations[0].approval).toMatchObject({ required: 2, youMayDecide: true });
    const inboxOf = async (who: string) =>
      ((await on(a, who, "GET", "/api/tool-chains/decisions?mine=true")).body.decisions as { runId: string }[]).map(
        (d) => d.runId,
      );
    expect(await inboxOf("linus")).toContain(runId);
    expect(await inboxOf("grace")).not.toContain(runId);
    expect(await inboxOf("ada")).not.toContain(runId);
    expect(await inboxOf("olga")).toEqual([]);
    expect(ledger.log).not.toContain("deploy:v1");

    // the second approver, on process B, completes the quorum: the step runs once
    const second = await decide(b, "linus", runId, "approve");
    expect([second.status, second.body.status]).toEqual([200, "completed"]);
    expect(ledger.log.filter((l) => l === "deploy:v1")).toHaveLength(1);
    expect(second.body.steps[0].decision).toMatchObject({
      decision: "approve",
      by: { id: "linus" },
      approvals: [{ by: { id: "grace" }, comment: "looks fine" }, { by: { id: "linus" } }],
    });
    const events = (await on(a, "grace", "GET", `/api/tool-chains/runs/${runId}/events`)).body.events as {
      type: string;
      data: Record<string, unknown>;
    }[];
    expect(events.filter((e) => e.type === "approval_given").map((e) => e.data)).toEqual([
      expect.objectContaining({ stepId: "deploy", by: { kind: "user", id: "grace" }, given: 1, required: 2 }),
    ]);
    expect(events.find((e) => e.type === "step_confirmed")!.data).toMatchObject({
      by: { id: "linus" },
      approvals: [{ by: { id: "grace" } }, { by: { id: "linus" } }],
    });
    expect(await inboxOf("linus")).not.toContain(runId);
  });

  test("one allowed reject rejects at once, even after an approval", async () => {
    const runId = await start("v2");
    expect((await decide(a, "grace", runId, "approve")).body.status).toBe("waiting_confirmation");
    const rejected = await decide(b, "linus", runId, "reject", { comment: "not today" });
    expect(rejected.status).toBe(200);
    expect(rejected.body).toMatchObject({
      status: "failed",
      steps: [{ status: "failed", error: { code: "REJECTED" }, decision: { decision: "reject", by: { id: "linus" } } }],
    });
    expect(ledger.log).not.toContain("deploy:v2");
  });

  test("edited arguments are refused under a quorum (every approver must see the same arguments)", async () => {
    const runId = await start("v3");
    const r = await decide(a, "grace", runId, "approve", { arguments: { version: "v3-hotfix" } });
    expect([r.status, r.body.error.code]).toEqual([400, "INVALID_DECISION"]);
    expect(r.body.error.message).toContain("arguments");
  });

  test("a plan step tightens the skill's policy and cannot loosen it", async () => {
    // tries to loosen (quorum 1, requester allowed) and narrows to one user
    const runId = await start("v4", { quorum: 1, allowRequester: true, users: ["linus"], roles: ["approver"] });
    const self = await decide(a, "ada", runId, "approve");
    expect(self.body.error.code).toBe("REQUESTER_CANNOT_APPROVE");
    const one = await decide(a, "linus", runId, "approve");
    expect(one.body.status).toBe("waiting_confirmation"); // still two approvals needed
    // the skill's gate and the step's both hold (a step naming linus does not let him past the skill's roles)
    expect(one.body.pendingConfirmations[0].approval.policy).toMatchObject({
      quorum: 2,
      allowRequester: false,
      roles: ["approver", "admin"],
      allOf: [{ roles: ["approver"], users: ["linus"] }],
    });
    // a step on a skill without a policy may add one: only linus decides
    const noted = await on(a, "ada", "POST", "/api/tool-chains/run", {
      plan: {
        steps: [{ stepId: "n", skillName: "test.note", arguments: { text: "hi" }, approval: { users: ["linus"] } }],
      },
    });
    const refused = await on(a, "grace", "POST", `/api/tool-chains/runs/${noted.body.runId}/confirm`, {
      stepId: "n",
      decision: "approve",
    });
    expect([refused.status, refused.body.error.code]).toEqual([403, "NOT_ALLOWED_TO_DECIDE"]);
    expect(refused.body.error.message).toContain("users linus");
    const ok = await on(a, "linus", "POST", `/api/tool-chains/runs/${noted.body.runId}/confirm`, {
      stepId: "n",
      decision: "approve",
    });
    expect(ok.body.status).toBe("completed");
    // a policy that does not parse names the field
    const bad = await on(a, "ada", "POST", "/api/tool-chains/run", { plan: deployPlan("v5", { quorum: 0 }) });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body.error)).toContain("quorum");
  });

  test("the inbox: oldest first; mine=false lists every waiting step with youMayDecide; bad query is 400", async () => {
    const all = (await on(a, "linus", "GET", "/api/tool-chains/decisions")).body.decisions as {
      runId: string;
      runCreatedAt: string;
      youMayDecide: boolean;
    }[];
    expect(all.length).toBeGreaterThan(0);
    expect(all.map((d) => d.runCreatedAt)).toEqual([...all.map((d) => d.runCreatedAt)].sort());
    expect(all.some((d) => d.youMayDecide === false)).toBe(true); // linus already approved v4 once
    const mine = (await on(a, "linus", "GET", "/api/tool-chains/decisions?mine=true")).body.decisions as {
      youMayDecide: boolean;
    }[];
    expect(mine.length).toBe(all.filter((d) => d.youMayDecide).length);
    const bad = await on(a, "grace", "GET", "/api/tool-chains/decisions?mine=yes");
    expect([bad.status, bad.body.error.code]).toEqual([400, "INVALID_QUERY"]);
  });
});
