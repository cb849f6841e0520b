/**
 * The shape of a skill version as runs pin it. Declared in the kernel (run state, pending
 * confirmations and the API's schemas read it); src/skills/version.ts computes versions.
 */

export interface SkillVersion {
  version: string;
  /** sha256 (hex, 16 chars) of the schemas and rules: equal hashes need no migration. */
  hash: string;
}

/** A pinned skill this process cannot run at a compatible version. */
export interface VersionGap {
  skill: string;
  pinned: SkillVersion;
  /** What this process has (null: the skill is not registered here). */
  available: SkillVersion | null;
}
