/**
 * A confirmation resumed after a deploy: when the skill version that computed a wait's preview
 * (what its approver was shown) is not this process's, the pending confirmation says so
 * (`versionChanged { from, to }`), with the arguments as this version will run them (the one
 * migration path, src/skills/migrate-arguments.ts, validated against its input schema) and the
 * preview recomputed by this version (src/skills/preview.ts) when either differs from what was
 * shown; or why they no longer validate. Nothing is recorded: the approver sees it before deciding.
 */
import type { PendingConfirmation, VersionChange } from "../kernel/pending.js";
import type { RunState } from "../kernel/run-state.js";
import type { RunView } from "../kernel/run-view.js";
import { DEFAULT_WORKSPACE } from "../kernel/workspace.js";
import { migrateArguments } from "../skills/migrate-arguments.js";
import { computePreview } from "../skills/preview.js";
import { skillVersion } from "../skills/version.js";
import type { RuntimeCore } from "./core.js";

/** A preview runs skill code that reads (a table, a provider): bounded, like the edited-arguments preview. */
const PREVIEW_TIMEOUT_MS = 10_000;

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

export async function withVersionChanges(core: RuntimeCore, state: RunState, view: RunView): Promise<RunView> {
  if (!state.skillVersions || !view.pendingConfirmations.some((p) => (p.kind ?? "confirmation") === "confirmation"))
    return view;
  const pending = await Promise.all(view.pendingConfirmations.map((p) => versionChange(core, state, p)));
  return { ...view, pendingConfirmations: pending };
}

async function versionChange(core: RuntimeCore, state: RunState, p: PendingConfirmation): Promise<PendingConfirmation> {
  const skill = core.registry.get(p.skillName);
  const rec = state.steps[p.stepId];
  if (!skill || !rec || (p.kind ?? "confirmation") !== "confirmation") return p;
  const pinned = state.skillVersions?.[skill.name];
  const shown = rec.waitVersion?.skill === skill.name ? rec.waitVersion : pinned;
  const to = skillVersion(skill);
  if (!shown || shown.hash === to.hash) return p;
  const change: VersionChange = { from: { version: shown.version, hash: shown.hash }, to };
  const before = (p.arguments ?? {}) as Record<string, unknown>;
  const m = migrateArguments(
    skill,
    before,
    (rec.argsVersion?.skill === skill.name ? rec.argsVersion : pinned) ?? shown,
  );
  const parsed = m.ok ? skill.input.safeParse(m.args) : undefined;
  if (!m.ok) change.error = m.error;
  else if (!parsed!.success) {
    const issue = parsed!.error.issues[0]!;
    change.error = { code: "INVALID_INPUT", message: `arguments.${issue.path.join(".")}: ${issue.message}` };
  } else {
    if (!same(m.args, before)) change.arguments = m.args;
    const res = await computePreview(skill, parsed!.data, {
      runId: state.runId,
      stepId: p.stepId,
      idempotencyKey: p.fallback ? `${state.runId}:${p.stepId}:fallback` : `${state.runId}:${p.stepId}`,
      signal: AbortSignal.timeout(PREVIEW_TIMEOUT_MS),
      logger: core.env.logger(state.runId, p.stepId),
      context: state.context,
      workspaceId: state.workspaceId ?? DEFAULT_WORKSPACE,
    });
    if (!res.ok) change.error = { code: res.error.code, message: res.error.message };
    else if (!same(res.preview, p.preview)) change.preview = res.preview;
  }
  return { ...p, versionChanged: change };
}
