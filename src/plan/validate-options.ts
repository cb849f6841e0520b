/** What a plan is validated against. */
import type { SkillRegistry } from "../skills/registry.js";

export interface ValidateOptions {
  registry: SkillRegistry;
  /** Workspace allowlist. */
  allowSkill?: (name: string) => boolean;
  /** When given, context/memory references are checked against them. */
  context?: unknown;
  memory?: Record<string, unknown>;
  maxSteps?: number;
  /**
   * Skills whose literal arguments are not checked against the schema here: a run pinned to
   * another version of them (src/skills/version.ts), whose arguments are migrated and validated
   * by the attempt.
   */
  skipArgumentsOf?: (skillName: string) => boolean;
  /** The value budget for a step's resolved arguments. @default maxValueBytes() (TOOLCHAIN_MAX_VALUE_BYTES) */
  maxValueBytes?: number;
}
