/**
 * Skill versions, pure: what a run pins for each skill its plan uses (declared semver plus a hash
 * of what a run depends on: input and output schemas, confirmation, compensation, idempotency)
 * and whether a process's skill can drive a run pinned to another version.
 */
import { createHash } from "node:crypto";
import { z } from "zod";
import type { Skill } from "./contract.js";
import type { SkillVersion, VersionGap } from "../kernel/skill-version.js";

export type { SkillVersion, VersionGap } from "../kernel/skill-version.js";

export const DEFAULT_SKILL_VERSION = "1.0.0";

/** JSON with sorted keys, so equal schemas hash equally whatever order zod wrote them in. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object")
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(v) ?? "null";
}

const cache = new WeakMap<Skill, SkillVersion>();

export function skillVersion(s: Skill): SkillVersion {
  const hit = cache.get(s);
  if (hit) return hit;
  const schema = (t: z.ZodType | undefined) => (t ? z.toJSONSchema(t, { unrepresentable: "any" }) : null);
  const rules = {
    input: schema(s.input),
    output: schema(s.output),
    sideEffects: s.sideEffects,
    idempotent: s.idempotent,
    // a function-valued rule is hashed by its presence: its behaviour is the version's to declare
    requiresConfirmation: typeof s.requiresConfirmation === "function" ? "fn" : (s.requiresConfirmation ?? false),
    approval: s.approval ?? null,
    compensate: Boolean(s.compensate),
    createdRecords: Boolean(s.createdRecords),
  };
  const v = {
    version: s.version ?? DEFAULT_SKILL_VERSION,
    hash: createHash("sha256").update(canonical(rules)).digest("hex").slice(0, 16),
  };
  cache.set(s, v);
  return v;
}

/** How this process's skill stands to a pinned version. */
export type Compatibility = "same" | "compatible" | "migrate" | "incompatible";

export function compatibility(pinned: SkillVersion, skill: Skill | undefined): Compatibility {
  if (!skill) return "incompatible";
  const mine = skillVersion(skill);
  if (mine.hash === pinned.hash) return "same";
  if (!skill.compatibleWith?.includes(pinned.version)) return "incompatible";
  return skill.migrate ? "migrate" : "compatible";
}

/** The first pinned skill this process cannot drive (skill names in plan order), if any. */

export function firstGap(
  pins: Record<string, SkillVersion> | null | undefined,
  get: (name: string) => Skill | undefined,
): VersionGap | undefined {
  for (const [name, pinned] of Object.entries(pins ?? {})) {
    const skill = get(name);
    if (compatibility(pinned, skill) === "incompatible")
      return { skill: name, pinned, available: skill ? skillVersion(skill) : null };
  }
  return undefined;
}

/** The skills a plan uses: its steps', their fallback skills' and rollback skills'. */
export function skillsOfPlan(plan: {
  steps: readonly { skillName: string; fallback?: unknown; rollback?: unknown }[];
}): string[] {
  const names = new Set<string>();
  for (const s of plan.steps) {
    names.add(s.skillName);
    for (const x of [s.fallback, s.rollback])
      if (x && typeof x === "object" && typeof (x as { skillName?: unknown }).skillName === "string")
        names.add((x as { skillName: string }).skillName);
  }
  return [...names];
}

export function pinVersions(plan: Parameters<typeof skillsOfPlan>[0], get: (name: string) => Skill | undefined) {
  const pins: Record<string, SkillVersion> = {};
  for (const n of skillsOfPlan(plan)) {
    const s = get(n);
    if (s) pins[n] = skillVersion(s);
  }
  return pins;
}

/** The run is pinned to another schema of this skill than the process has (same semver or not). */
export function versionShifted(
  pins: Record<string, SkillVersion> | null | undefined,
  get: (name: string) => Skill | undefined,
): (name: string) => boolean {
  return (name) => {
    const pinned = pins?.[name];
    const skill = get(name);
    return pinned !== undefined && skill !== undefined && skillVersion(skill).hash !== pinned.hash;
  };
}
