/** The error a run fails with when no process has a compatible version of a pinned skill. */
import { ErrorCode, type StepError } from "../kernel/errors.js";
import type { VersionGap } from "./version.js";

export function versionUnavailableError(gap: VersionGap): StepError {
  const have = gap.available ? `${gap.available.version} (${gap.available.hash})` : "none";
  return {
    code: ErrorCode.SKILL_VERSION_UNAVAILABLE,
    message: `skill "${gap.skill}": the run was planned against version ${gap.pinned.version} (${gap.pinned.hash}); no process has a compatible version (available: ${have})`,
    details: { skill: gap.skill, pinned: gap.pinned, available: gap.available },
  };
}
