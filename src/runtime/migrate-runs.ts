/**
 * `runs migrate`: the runs of a workspace that wait for a person with a skill pinned at another
 * version than this process's, and their waiting steps' arguments carried to this version through
 * the same migration a resumed run goes through (src/skills/migrate-arguments.ts). A dry run
 * reads only. A run is migrated whole or not at all: one refused step (no migration declared,
 * arguments that do not validate) leaves it as it was, with the reason.
 */
import type { Acting } from "../kernel/actor.js";
import { LIBRARY_ACTING } from "../kernel/actor.js";
import { ErrorCode, ToolchainError } from "../kernel/errors.js";
import { EventType, eventKey } from "../kernel/events.js";
import { pendingConfirmations } from "../kernel/pending.js";
import type { RunState, StepRecord, StepSkillVersion } from "../kernel/run-state.js";
import { migrateArguments } from "../skills/migrate-arguments.js";
import { skillVersion, type SkillVersion } from "../skills/version.js";
import type { Skill } from "../skills/contract.js";
import { continueInput } from "./new-run.js";
import { outsideCallerContext } from "./driver.js";
import type { RuntimeCore } from "./core.js";

export interface MigrateRunsOptions {
  /** The skill whose runs to migrate (as this process registers it). */
  skill: string;
  workspaceId: string;
  /** Report what would change; change nothing. */
  dryRun?: boolean;
}

export interface StepMigration {
  stepId: string;
  /** The version the step's arguments are for now, and this process's. */
  from: SkillVersion;
  to: SkillVersion;
  before: Record<string, unknown>;
  /** The migrated arguments (absent when refused). */
  after?: Record<string, unknown>;
  /** Top-level argument fields that change: `{ field: { from, to } }`. */
  changes?: Record<string, { from: unknown; to: unknown }>;
  refused?: { code: string; message: string };
}

export interface RunMigration {
  runId: string;
  /** `migrated` (done), `would_migrate` (dry run), `refused` (nothing changed: see `refused` or the steps'), `current` (its waiting steps are already for this version). */
  outcome: "migrated" | "would_migrate" | "refused" | "current";
  pinned: SkillVersion;
  steps: StepMigration[];
  refused?: { code: string; message: string };
}

export interface MigrateRunsReport {
  skill: string;
  to: SkillVersion;
  dryRun: boolean;
  runs: RunMigration[];
}

export async function migrateRuns(
  core: RuntimeCore,
  opts: MigrateRunsOptions,
  acting: Acting = LIBRARY_ACTING,
): Promise<MigrateRunsReport> {
  const skill = core.registry.get(opts.skill);
  if (!skill) throw new ToolchainError(ErrorCode.UNKNOWN_SKILL, `skill: "${opts.skill}" is not registered here`);
  const to = skillVersion(skill);
  const runs: RunMigration[] = [];
  for (let cursor: string | undefined; ;) {
    const page = await core.store.listRuns({
      workspaceId: opts.workspaceId,
      statuses: ["waiting_confirmation"],
      limit: 200,
      ...(cursor ? { cursor } : {}),
    });
    for (const r of page.runs) {
      const state = (await core.stateOf(r.runId)).values as Partial<RunState>;
      const pinned = state.skillVersions?.[skill.name];
      if (!state.runId || !pinned || pinned.hash === to.hash) continue;
      const planned = planMigration(state as RunState, skill, pinned, to);
      runs.push(
        opts.dryRun || planned.outcome !== "would_migrate" ? planned : await apply(core, planned, skill, acting),
      );
    }
    if (!page.nextCursor) break;
    cursor = page.nextCursor;
  }
  return { skill: skill.name, to, dryRun: Boolean(opts.dryRun), runs };
}

/** What migrating one run would change, from its state (pure). */
function planMigration(state: RunState, skill: Skill, pinned: SkillVersion, to: SkillVersion): RunMigration {
  const steps: StepMigration[] = [];
  for (const p of pendingConfirmations(state)) {
    if (p.skillName !== skill.name || p.kind === "compensation") continue;
    const rec = state.steps[p.stepId]!;
    const from = version(rec.argsVersion?.skill === skill.name ? rec.argsVersion : pinned);
    const before = (p.arguments ?? {}) as Record<string, unknown>;
    const m = migrateArguments(skill, before, from);
    if (!m.ok) steps.push({ stepId: p.stepId, from, to, before, refused: m.error });
    else if (m.changed)
      steps.push({ stepId: p.stepId, from, to, before, after: m.args, changes: changes(before, m.args) });
    // unchanged: this step's arguments are already for this version
  }
  const refused = steps.find((s) => s.refused);
  return {
    runId: state.runId,
    outcome: refused ? "refused" : steps.length ? "would_migrate" : "current",
    pinned: version(pinned),
    steps,
    ...(refused
      ? { refused: { code: refused.refused!.code, message: `step "${refused.stepId}": ${refused.refused!.message}` } }
      : {}),
  };
}

const version = (v: SkillVersion): SkillVersion => ({ version: v.version, hash: v.hash });

function changes(
  a: Record<string, unknown>,
  b: Record<string, unknown>,
): Record<string, { from: unknown; to: unknown }> {
  const out: Record<string, { from: unknown; to: unknown }> = {};
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)]))
    if (JSON.stringify(a[k]) !== JSON.stringify(b[k])) out[k] = { from: a[k] ?? null, to: b[k] ?? null };
  return out;
}

/**
 * Write the migrated arguments under the run's lease (re-planned on the state read under it), as
 * the scheduler node, so the next node is the approval node; then drive the run here until it
 * waits again (its confirmations raised with the new arguments).
 */
async function apply(core: RuntimeCore, planned: RunMigration, skill: Skill, acting: Acting): Promise<RunMigration> {
  const runId = planned.runId;
  const refuse = (code: string, message: string): RunMigration => ({
    ...planned,
    outcome: "refused",
    refused: { code, message },
  });
  if (core.active.has(runId) || !(await core.store.acquireLease(runId, core.owner, core.leaseTtlMs)))
    return refuse(ErrorCode.RUN_BEING_DRIVEN, `run ${runId} is being executed by another process`);
  let handed = false;
  try {
    if ((await core.store.unappliedDecisions(runId)).length)
      return refuse(ErrorCode.RUN_BEING_DRIVEN, `run ${runId} has a recorded decision a worker is about to apply`);
    const snap = await core.stateOf(runId);
    const state = snap.values as RunState;
    const to = skillVersion(skill);
    const now = state.status === "waiting_confirmation" && state.skillVersions?.[skill.name];
    if (!now) return refuse(ErrorCode.CONFIRMATION_NOT_PENDING, `run ${runId} no longer waits for a confirmation`);
    const fresh = planMigration(state, skill, now, to);
    if (fresh.outcome !== "would_migrate") return fresh;
    const at = new Date(core.env.now()).toISOString();
    const argsVersion: StepSkillVersion = { skill: skill.name, ...version(to) };
    const steps: Record<string, StepRecord> = {};
    for (const m of fresh.steps) {
      const rec = state.steps[m.stepId]!;
      const fallback = pendingConfirmations(state).find((p) => p.stepId === m.stepId)?.fallback;
      steps[m.stepId] = { ...rec, ...(fallback ? { fallbackInput: m.after } : { input: m.after }), argsVersion };
    }
    await outsideCallerContext(() =>
      core.graph.updateState({ configurable: { thread_id: runId } }, { steps, updatedAt: at }, "scheduler"),
    );
    await core.store.append(
      runId,
      fresh.steps.map((m) => ({
        type: EventType.step_arguments_migrated,
        stepId: m.stepId,
        at,
        data: { skillName: skill.name, from: m.from, to: m.to, changes: m.changes, by: acting.by, via: acting.via },
        key: eventKey(EventType.step_arguments_migrated, m.stepId, to.hash, 0),
      })),
      core.owner,
    );
    const row = await core.store.getRow(runId);
    const handle = core.drive(runId, continueInput(row!, { started: true, interrupted: false, decisions: {} }, at));
    handed = true;
    await handle.result;
    return { ...fresh, outcome: "migrated" };
  } finally {
    if (!handed) await core.store.releaseLease(runId, core.owner).catch(() => undefined);
  }
}
