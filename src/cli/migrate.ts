/**
 * `toolchain runs migrate --skill <name> [--dry-run]`: the runs waiting for a person with that
 * skill pinned at another version, their waiting steps' arguments carried to this process's
 * version (Runtime.migrateRuns, src/runtime/migrate-runs.ts; this is only its surface). It owns
 * the database, like keys and prune: `--url` is refused.
 */
import type { Command } from "commander";
import type { MigrateRunsReport } from "../runtime/migrate-runs.js";
import { LOCAL_WORKSPACE, terminalUser } from "./backend.js";
import { localOnly, printJson, type Ctx, type Register } from "./context.js";
import { esc } from "./escape.js";
import { Exit, usage } from "./exit.js";

const v = (x: { version: string; hash: string }) => `${x.version} (${x.hash})`;
const j = (x: unknown) => (x === null || x === undefined ? "(none)" : JSON.stringify(x));

/** The report for people: per run, per step, what changes (or why not). */
export function migrateLines(r: MigrateRunsReport): string[] {
  const out = [
    `skill ${r.skill} → ${v(r.to)}${r.dryRun ? " · dry run: nothing was changed" : ""} · ${r.runs.length} run(s) pinned at another version`,
  ];
  const said = { migrated: "migrated", would_migrate: "would migrate", refused: "refused", current: "already current" };
  for (const run of r.runs) {
    out.push(`run ${run.runId} · pinned ${v(run.pinned)} · ${said[run.outcome]}`);
    if (run.refused) out.push(`  ${run.refused.code}: ${run.refused.message}`);
    for (const s of run.steps) {
      out.push(
        `  step ${s.stepId}: ${s.from.version} → ${s.to.version}${s.refused ? ` refused (${s.refused.code})` : ""}`,
      );
      for (const [field, c] of Object.entries(s.changes ?? {})) out.push(`    ${field}: ${j(c.from)} → ${j(c.to)}`);
    }
  }
  return out.map(esc);
}

export function registerMigrate(runs: Command, register: Register): void {
  register(
    runs
      .command("migrate")
      .summary("carry the arguments of waiting runs pinned at an older version of a skill to this version")
      .requiredOption("--skill <name>", "the skill (as this deploy registers it)")
      .option("--dry-run", "print what would change per run and step; change nothing")
      .option("--workspace <id>", 'the workspace (default TOOLCHAIN_WORKSPACE or "local")'),
    async (ctx: Ctx, _a, o) => {
      localOnly(ctx, "runs migrate");
      const skill = String(o.skill ?? "").trim();
      if (!skill) throw usage("--skill: a skill name");
      const opened = await ctx.openRuntime();
      try {
        const report = await opened.runtime.migrateRuns(
          {
            skill,
            workspaceId: (o.workspace as string | undefined) ?? (process.env.TOOLCHAIN_WORKSPACE || LOCAL_WORKSPACE),
            dryRun: Boolean(o.dryRun),
          },
          terminalUser(),
        );
        if (ctx.json) printJson(ctx, report);
        else for (const l of migrateLines(report)) ctx.out(l);
        return report.runs.some((r) => r.outcome === "refused") ? Exit.failed : Exit.ok;
      } finally {
        await opened.close();
      }
    },
  );
}
