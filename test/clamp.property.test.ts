/**
 * clampPlan over arbitrary model-written steps: whatever the model proposes, the clamped plan
 * never weakens a skill's confirmation, never retries a non-idempotent side effect, never carries
 * a model-chosen rollback or acceptNoCompensation, stays within the configured caps, reports one
 * warning per change, and clamping twice changes nothing more.
 */
import { fc, test } from "@fast-check/vitest";
import { expect } from "vitest";
import { z } from "zod";
import { clampPlan } from "../src/planner/clamp.js";
import { defineSkill, hasSideEffects, type Skill } from "../src/skills/contract.js";

const limits = { maxAttempts: 3, maxStepTimeoutMs: 300_000 };
const mk = (name: string, o: Partial<Skill>): Skill =>
  defineSkill({
    name,
    description: name,
    input: z.object({}).passthrough(),
    sideEffects: "none",
    idempotent: true,
    execute: async () => ({}),
    ...o,
  } as never) as Skill;
const skills = new Map<string, Skill>(
  [
    mk("t.pure", {}),
    mk("t.read", { sideEffects: "read" }),
    mk("t.write_idem", { sideEffects: "write", idempotent: true, requiresConfirmation: true }),
    mk("t.write_once", { sideEffects: "write", idempotent: false }),
    mk("t.send", { sideEffects: "external", idempotent: false, requiresConfirmation: () => true }),
  ].map((s) => [s.name, s]),
);

const step = fc.record(
  {
    stepId: fc.constantFrom("a", "b", "c"),
    skillName: fc.constantFrom(...skills.keys(), "t.unknown"),
    requireConfirmation: fc.boolean(),
    retry: fc.record({ maxAttempts: fc.integer({ min: 1, max: 10 }) }),
    timeoutMs: fc.integer({ min: 1, max: 86_400_000 }),
    rollback: fc.constant({ kind: "none" }),
    acceptNoCompensation: fc.boolean(),
  },
  { requiredKeys: ["stepId", "skillName"] },
);

test.prop([fc.array(step, { maxLength: 8 })])("clamped plans respect the skills' metadata", (steps) => {
  const { plan, warnings } = clampPlan({ steps }, (n) => skills.get(n), limits);
  const out = (plan as { steps: Record<string, any>[] }).steps;
  let changes = 0;
  out.forEach((s, i) => {
    const before = steps[i]!;
    const skill = skills.get(s.skillName);
    if (!skill) {
      expect(s).toEqual(before); // unknown skills are left to validation
      return;
    }
    if (skill.requiresConfirmation) expect(s.requireConfirmation).not.toBe(false);
    if (hasSideEffects(skill) && !skill.idempotent && s.retry) expect(s.retry.maxAttempts).toBe(1);
    if (s.retry) expect(s.retry.maxAttempts).toBeLessThanOrEqual(limits.maxAttempts);
    if (s.timeoutMs !== undefined) expect(s.timeoutMs).toBeLessThanOrEqual(limits.maxStepTimeoutMs);
    expect(s.rollback).toBeUndefined();
    expect(s.acceptNoCompensation).toBeUndefined();
    for (const k of ["requireConfirmation", "retry", "timeoutMs", "rollback", "acceptNoCompensation"] as const) {
      if (JSON.stringify(s[k]) !== JSON.stringify(before[k])) changes++;
    }
  });
  expect(warnings).toHaveLength(changes);
  // a fixpoint: clamping the clamped plan changes nothing and warns about nothing
  const again = clampPlan(plan, (n) => skills.get(n), limits);
  expect(again.plan).toEqual(plan);
  expect(again.warnings).toEqual([]);
});
