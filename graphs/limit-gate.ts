/**
 * The scheduler node's bridge to limits across runs (src/kernel/limits.ts): which claims a step
 * attempt needs, and running the attempt's body only while they are held.
 *
 * A step that must wait stays `pending` (or `retrying`) with a `step_waiting_for_limit` event
 * naming what it waits for; `step_started` is emitted once every claim is held, and the step's
 * timeout starts only then (waiting does not count against it). Aborting the step (cancel,
 * fail_fast, deadline) stops the wait. The claims are released when the attempt ends.
 */
import { ErrorCode, toStepError, type StepError } from "../src/kernel/errors.js";
import { EventType } from "../src/kernel/events.js";
import { waitingFor, type LimitClaim } from "../src/kernel/limits.js";
import type { Skill } from "../src/skills/contract.js";
import type { Emit } from "./emit.js";
import type { RuntimeEnv } from "./env.js";

/** Claims of one attempt: the skill's serial key for these arguments, its resource, parallelSafe. */
export function limitClaims(skill: Skill, args: unknown): LimitClaim[] {
  const claims: LimitClaim[] = [];
  if (skill.parallelSafe === false) claims.push({ kind: "serialKey", name: `skill:${skill.name}`, limit: 1 });
  if (skill.serialKey) {
    const parsed = skill.input.safeParse(args);
    const k = parsed.success ? skill.serialKey(parsed.data) : undefined;
    if (k !== undefined) claims.push({ kind: "serialKey", name: k, limit: 1 });
  }
  if (skill.resource)
    claims.push({
      kind: "resource",
      name: skill.resource.name,
      limit: skill.resource.limit,
      ...(skill.resource.perSecond !== undefined ? { perSecond: skill.resource.perSecond } : {}),
    });
  return claims;
}

/** Whether the attempt goes through the gate (else the caller starts it as before). */
export function isGated(env: RuntimeEnv, claims: readonly LimitClaim[]): boolean {
  return env.limits !== undefined && claims.length > 0;
}

/**
 * Hold every claim, then `started()` (emit step_started) and run `body`; release at the end. If
 * the wait is aborted, the attempt fails with the abort reason (its effect never started).
 */
export async function runGated<T>(
  env: RuntimeEnv,
  emit: Emit,
  who: { runId: string; stepId: string; attempt: number },
  claims: readonly LimitClaim[],
  signal: AbortSignal,
  started: () => void,
  body: () => Promise<T>,
  notStarted: (error: StepError) => T,
): Promise<T> {
  const limits = env.limits!;
  let permit;
  try {
    const workspaceId = await limits.workspaceOf(who.runId);
    permit = await limits.coordinator.acquire(
      claims,
      { ...who, workspaceId },
      {
        signal,
        onWait: (c) =>
          emit(
            EventType.step_waiting_for_limit,
            who.stepId,
            { attempt: who.attempt, waitingFor: waitingFor(c) },
            `${who.attempt}:${c.kind}:${c.name}`,
          ),
      },
    );
  } catch (e) {
    const reason = signal.aborted ? signal.reason : e;
    const error = toStepError(reason);
    return notStarted({ ...error, code: signal.aborted ? error.code : ErrorCode.TRANSIENT, effectStarted: false });
  }
  try {
    started();
    return await body();
  } finally {
    await permit.release().catch(() => undefined);
  }
}
