/**
 * "Does executing this skill need a person's decision first?" One answer for every place that asks:
 * the scheduler (a step's skill, a fallback skill), the compensation node (a rollback skill),
 * `toolchain plan`, the agent tools' plan outline and admission of a plan (who may relax it).
 *
 * The skill's own rule is the floor. A plan may tighten it (`requireConfirmation: true`); it may
 * loosen it only when its author is a person allowed to, and never for an effect that is external
 * and cannot be undone (see `mayRelax`). Pure.
 */
import { hasSideEffects, type Skill } from "../skills/contract.js";

type RuleSkill = Pick<Skill, "requiresConfirmation" | "input" | "sideEffects" | "compensate" | "createdRecords">;

/** The skill's own rule for these arguments (arguments that do not parse: ask, to be safe). */
export function skillAsks(skill: RuleSkill, args: unknown): boolean {
  const rc = skill.requiresConfirmation;
  if (typeof rc !== "function") return Boolean(rc);
  const parsed = skill.input.safeParse(args);
  return parsed.success ? Boolean(rc(parsed.data)) : true;
}

/** External and irreversible, with a confirmation rule: no plan can remove that rule (it always holds). */
export function alwaysAsks(skill: RuleSkill): boolean {
  return (
    Boolean(skill.requiresConfirmation) &&
    skill.sideEffects === "external" &&
    !skill.compensate &&
    !skill.createdRecords
  );
}

/**
 * At execution: whether this attempt waits for a decision. `planned` is the plan's
 * `requireConfirmation` (admitted plans only relax where `mayRelax` allowed it); `approved` is
 * true when a person already approved this very execution.
 */
export function confirmationRequired(
  skill: RuleSkill,
  args: unknown,
  planned: boolean | undefined,
  approved: boolean,
): boolean {
  if (approved) return false;
  if (planned === true) return true;
  if (planned === false && !alwaysAsks(skill)) return false;
  return skillAsks(skill, args);
}

/**
 * At planning time, before arguments are known: "yes" when it will ask, "maybe" when it depends on
 * arguments that reference other steps, "no" otherwise. `staticArgs` is undefined when the
 * arguments hold references.
 */
export function plannedConfirmation(
  skill: RuleSkill,
  planned: boolean | undefined,
  staticArgs: unknown | undefined,
): "yes" | "maybe" | "no" {
  if (planned === true) return "yes";
  if (planned === false && !alwaysAsks(skill)) return "no";
  if (typeof skill.requiresConfirmation !== "function") return skill.requiresConfirmation ? "yes" : "no";
  if (staticArgs === undefined) return "maybe";
  return skillAsks(skill, staticArgs) ? "yes" : "no";
}

/** Who may write `requireConfirmation: false` on a skill that asks: a person with the permission, never for `alwaysAsks`. */
export function mayRelax(
  skill: RuleSkill,
  author: { kind: "person" | "model" | "agent"; mayRelaxConfirmation?: boolean },
): boolean {
  if (!skill.requiresConfirmation) return true; // nothing to relax
  if (author.kind !== "person" || author.mayRelaxConfirmation !== true) return false;
  return !alwaysAsks(skill);
}

/** A side effect nobody can undo (for strict rollback): no compensation and no created-records account. */
export function compensable(skill: Pick<Skill, "sideEffects" | "compensate" | "createdRecords">): boolean {
  return !hasSideEffects(skill) || typeof skill.compensate === "function" || skill.createdRecords !== undefined;
}
