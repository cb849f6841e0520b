/**
 * A step's approval policy meeting its skill's (and the workspace floor): who may decide under the
 * merged policy is exactly who may decide under both (src/kernel/approval-policy.ts). The merge
 * used to intersect roles and users field by field, which loosened a skill's `roles: [admin]`
 * by a step's `users: [grace]` (grace decided without being an admin) and let nobody decide
 * when two sides named different roles a person holds both of.
 */
import { fc, test } from "@fast-check/vitest";
import { describe, expect } from "vitest";
import { z } from "zod";
import { ROLES, type Decider, type Role } from "../src/kernel/actor.js";
import { refusal, strictest, type ApprovalPolicy } from "../src/kernel/approval-policy.js";
import { defineSkill, SkillRegistry } from "../src/index.js";
import { compilePlan, PlanValidationError } from "../src/plan/validate.js";

const USERS = ["ada", "grace", "linus"];
const who = fc.record({
  roles: fc.option(fc.subarray([...ROLES], { minLength: 0 }), { nil: undefined }),
  users: fc.option(fc.subarray(USERS, { minLength: 1 }), { nil: undefined }),
});
const policy: fc.Arbitrary<ApprovalPolicy> = fc
  .tuple(
    fc.option(fc.subarray([...ROLES], { minLength: 1 }), { nil: undefined }),
    fc.option(fc.subarray(USERS, { minLength: 1 }), { nil: undefined }),
  )
  .map(([roles, users]) => ({ ...(roles ? { roles } : {}), ...(users ? { users } : {}) }));
const decider: fc.Arbitrary<Decider> = fc
  .tuple(fc.constantFrom(...USERS), fc.subarray([...ROLES] as Role[]))
  .map(([id, roles]) => ({ by: { kind: "user", id }, via: "rest", roles }));
const may = (p: ApprovalPolicy | undefined, d: Decider) => refusal(p, d, undefined, "approve") === undefined;

describe("merging approval policies", () => {
  test.prop([fc.array(policy, { minLength: 1, maxLength: 4 }), decider])(
    "a decider passes the merged policy exactly when it passes every side",
    (sides, d) => {
      const merged = sides.reduce<ApprovalPolicy | undefined>((acc, p) => strictest(acc, p), undefined);
      expect(may(merged, d)).toBe(sides.every((p) => may(p, d)));
    },
  );

  test.prop([who])("merging a policy with itself changes nobody's answer", (w) => {
    const p: ApprovalPolicy = {
      ...(w.roles?.length ? { roles: w.roles } : {}),
      ...(w.users ? { users: w.users } : {}),
    };
    for (const id of USERS)
      for (const roles of [[], ["admin"], ["approver"], [...ROLES]] as Role[][]) {
        const d: Decider = { by: { kind: "user", id }, via: "rest", roles };
        expect(may(strictest(p, p), d)).toBe(may(p, d));
      }
  });

  test("the two cases that went wrong", () => {
    const grace = (roles: Role[]): Decider => ({ by: { kind: "user", id: "grace" }, via: "rest", roles });
    // a step naming a user does not let that user past the skill's roles
    const adminsOnly = strictest({ roles: ["admin"] }, { users: ["grace"] });
    expect(refusal(adminsOnly, grace(["approver"]), undefined, "approve")?.code).toBe("NOT_ALLOWED_TO_DECIDE");
    expect(may(adminsOnly, grace(["admin"]))).toBe(true);
    expect(may(adminsOnly, { by: { kind: "user", id: "linus" }, via: "rest", roles: ["admin"] })).toBe(false);
    // a floor of operators and a skill of approvers: someone holding both decides (was: nobody)
    const both = strictest({ roles: ["operator"] }, { roles: ["approver"] });
    expect(may(both, grace(["operator", "approver"]))).toBe(true);
    expect(may(both, grace(["approver"]))).toBe(false);
    // a service key never passes a policy that names people
    expect(may(both, { by: { kind: "service", id: "k1" }, via: "rest" })).toBe(false);
  });
});

describe("a plan whose step policy lets nobody decide", () => {
  const signed = defineSkill({
    name: "test.signed",
    description: "needs ada or linus",
    input: z.object({}),
    sideEffects: "write",
    idempotent: true,
    requiresConfirmation: true,
    approval: { users: ["ada", "linus"] },
    async execute() {
      return null;
    },
  });
  const registry = new SkillRegistry([signed]);
  const plan = (users: string[]) => ({
    steps: [{ stepId: "s", skillName: "test.signed", arguments: {}, approval: { users } }],
  });

  test("is refused before it runs, naming the field; one that narrows to a shared user is not", () => {
    let err: unknown;
    try {
      compilePlan(plan(["grace"]), { registry });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(PlanValidationError);
    const issue = (err as PlanValidationError).issues[0]!;
    expect(issue).toMatchObject({ code: "PLAN_INVALID", stepId: "s", path: "approval.users" });
    expect(issue.message).toContain("no user is allowed by both");
    expect(() => compilePlan(plan(["linus", "grace"]), { registry })).not.toThrow();
  });
});
