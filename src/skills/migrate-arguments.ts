/**
 * One step's arguments carried from the skill version they were resolved for to this process's,
 * pure: the scheduler (before a preview or attempt) and `runs migrate` (src/runtime/migrate-runs.ts)
 * both go through it, so what an operator migrates is what a resumed run would have run.
 */
import { ErrorCode } from "../kernel/errors.js";
import type { Skill } from "./contract.js";
import { compatibility, skillVersion, type SkillVersion } from "./version.js";

export type ArgumentMigration =
  | { ok: true; args: Record<string, unknown>; changed: boolean }
  | { ok: false; error: { code: ErrorCode; message: string; field?: string } };

/**
 * `args` (resolved for `from`) for this process's version of `skill`: unchanged when the hash is
 * the same; else through its `migrate` (a declared `compatibleWith` without one keeps them as they
 * are) and validated against its input schema; refused when it declares no way from `from`.
 */
export function migrateArguments(skill: Skill, args: Record<string, unknown>, from: SkillVersion): ArgumentMigration {
  const to = skillVersion(skill);
  if (from.hash === to.hash) return { ok: true, args, changed: false };
  const how = compatibility(from, skill);
  const between = `${skill.name} ${from.version} (${from.hash}) → ${to.version} (${to.hash})`;
  if (how === "incompatible")
    return {
      ok: false,
      error: {
        code: ErrorCode.MIGRATION_UNAVAILABLE,
        message: `${between}: the skill declares no migration from ${from.version} (compatibleWith: [${(skill.compatibleWith ?? []).join(", ")}]${skill.migrate ? "" : ", no migrate()"})`,
      },
    };
  let next = args;
  if (how === "migrate") {
    try {
      next = skill.migrate!(args, from.version);
    } catch (e) {
      return {
        ok: false,
        error: { code: ErrorCode.INVALID_INPUT, message: `${between}: migrate() threw: ${(e as Error)?.message ?? e}` },
      };
    }
  }
  const parsed = skill.input.safeParse(next);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.length ? `arguments.${issue.path.join(".")}` : "arguments";
    return {
      ok: false,
      error: { code: ErrorCode.INVALID_INPUT, message: `${field}: ${issue.message} (after ${between})`, field },
    };
  }
  return { ok: true, args: next, changed: true };
}
