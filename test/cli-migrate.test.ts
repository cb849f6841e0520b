/**
 * `toolchain runs migrate --skill <name> [--dry-run]` in real child processes: a run planned and
 * left waiting by one deploy (test.versioned 1.0.0, test/fixtures/crash-child.ts), then the CLI of
 * the next deploy (test/fixtures/cli-versioned.ts): v2x declares no migration (refused, nothing
 * changed), v2m migrates `label` to `name` (a dry run changes nothing; the real one rewrites the
 * waiting arguments, which then run as they are, not migrated twice) and refuses a run whose
 * migrated arguments do not validate, naming the field.
 */
import { spawn } from "node:child_process";
import { afterAll, describe, expect, test } from "vitest";
import pg from "pg";
import { runToEnd, sharedStorage, type ChildEnv } from "./helpers/child.js";
import { serverUrl } from "./helpers/backends.js";
import { nodeArgs } from "./helpers/prebuilt.js";

interface Report {
  report: {
    status: string;
    steps: { stepId: string; output: unknown }[];
    pending: { stepId: string; arguments: unknown }[];
    types: string[];
  };
}
const reportOf = (lines: Record<string, unknown>[]) => lines.filter((l) => "report" in l).at(-1) as unknown as Report;

const st: ChildEnv = sharedStorage();
afterAll(async () => {
  if (!serverUrl) return;
  const pool = new pg.Pool({ connectionString: serverUrl, max: 1 });
  await pool.query(`DROP SCHEMA IF EXISTS "${st.schema}" CASCADE`).catch(() => undefined);
  await pool.end();
});
const gen = (g: string): ChildEnv => ({ ...st, env: { ...st.env, SKILL_GEN: g } });

function cli(g: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = spawn(process.execPath, [...nodeArgs("test/fixtures/cli-versioned.ts"), ...args], {
    env: {
      ...process.env,
      ...(serverUrl ? {} : { DATABASE_URL: "" }),
      ...st.env,
      SKILL_GEN: g,
      TOOLCHAIN_URL: "",
      TOOLCHAIN_API_KEY: "",
      // the runtime's default workspace, where test/fixtures/crash-child.ts starts its runs
      TOOLCHAIN_WORKSPACE: "default",
      NO_COLOR: "1",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => proc.kill("SIGKILL"), 120_000);
  return new Promise((resolve) => proc.on("exit", (code) => (clearTimeout(timer), resolve({ code, stdout, stderr }))));
}

const plan = (label: string) => ({
  steps: [
    { stepId: "a", skillName: "test.db_effect", arguments: { label: `a-${label}` } },
    { stepId: "p", skillName: "test.versioned", dependsOn: ["a"], arguments: { label } },
  ],
});

interface MigrateJson {
  skill: string;
  to: { version: string };
  dryRun: boolean;
  runs: {
    runId: string;
    outcome: string;
    pinned: { version: string };
    refused?: { code: string; message: string };
    steps: {
      stepId: string;
      from: { version: string };
      to: { version: string };
      after?: unknown;
      changes?: unknown;
      refused?: { code: string; message: string };
    }[];
  }[];
}
const byRun = (r: MigrateJson, id: string) => r.runs.find((x) => x.runId === id)!;

describe("toolchain runs migrate", () => {
  test("refused without a migration, a dry run that changes nothing, then the migration; the migrated arguments run as they are", async () => {
    for (const [id, label] of [
      ["mig-ok", "p"],
      ["mig-bad", ""],
    ] as const) {
      const r = reportOf(await runToEnd(gen("v1"), ["start", JSON.stringify(plan(label)), id]));
      expect(r.report.status).toBe("waiting_confirmation");
      expect(r.report.pending).toEqual([expect.objectContaining({ stepId: "p", arguments: { label } })]);
    }

    // a deploy whose skill declares no migration from 1.0.0: both refused, nothing changed
    const none = await cli("v2x", ["--json", "runs", "migrate", "--skill", "test.versioned"]);
    expect(none.code, none.stderr).toBe(1);
    const noneJson = JSON.parse(none.stdout) as MigrateJson;
    expect(noneJson.runs.map((r) => [r.runId, r.outcome]).sort()).toEqual([
      ["mig-bad", "refused"],
      ["mig-ok", "refused"],
    ]);
    expect(byRun(noneJson, "mig-ok").refused?.code).toBe("MIGRATION_UNAVAILABLE");
    expect(byRun(noneJson, "mig-ok").refused?.message).toContain("no migrate()");

    // the dry run: what would change, per run and step, and why a run is refused
    const dry = await cli("v2m", ["--json", "runs", "migrate", "--skill", "test.versioned", "--dry-run"]);
    expect(dry.code, dry.stderr).toBe(1);
    const dryJson = JSON.parse(dry.stdout) as MigrateJson;
    expect(dryJson).toMatchObject({ skill: "test.versioned", to: { version: "2.0.0" }, dryRun: true });
    expect(byRun(dryJson, "mig-ok")).toMatchObject({
      outcome: "would_migrate",
      pinned: { version: "1.0.0" },
      steps: [
        {
          stepId: "p",
          from: { version: "1.0.0" },
          to: { version: "2.0.0" },
          after: { name: "p" },
          changes: { label: { from: "p", to: null }, name: { from: null, to: "p" } },
        },
      ],
    });
    const bad = byRun(dryJson, "mig-bad");
    expect(bad.outcome).toBe("refused");
    expect(bad.refused?.code).toBe("INVALID_INPUT");
    expect(bad.refused?.message).toContain("arguments.name");
    expect(bad.refused?.message).toContain("a name is required");
    const text = await cli("v2m", ["runs", "migrate", "--skill", "test.versioned", "--dry-run"]);
    expect(text.stdout).toContain("dry run: nothing was changed");
    expect(text.stdout).toContain("run mig-ok · pinned 1.0.0");
    expect(text.stdout).toContain("would migrate");
    expect(text.stdout).toContain('name: (none) → "p"');
    expect(text.stdout).toMatch(/run mig-bad .* refused\n\s+INVALID_INPUT: step "p": arguments\.name/);
    // nothing changed
    const still = reportOf(await runToEnd(gen("v2m"), ["report", "mig-ok"]));
    expect(still.report.pending[0]!.arguments).toEqual({ label: "p" });
    expect(still.report.types).not.toContain("step_arguments_migrated");

    // the migration: the waiting arguments are the new version's, the run still waits
    const real = await cli("v2m", ["--json", "runs", "migrate", "--skill", "test.versioned"]);
    expect(real.code, real.stderr).toBe(1); // mig-bad is still refused
    const realJson = JSON.parse(real.stdout) as MigrateJson;
    expect(byRun(realJson, "mig-ok").outcome).toBe("migrated");
    expect(byRun(realJson, "mig-bad").outcome).toBe("refused");
    const after = reportOf(await runToEnd(gen("v2m"), ["report", "mig-ok"]));
    expect(after.report.status).toBe("waiting_confirmation");
    expect(after.report.pending).toEqual([expect.objectContaining({ stepId: "p", arguments: { name: "p" } })]);
    expect(after.report.types).toContain("step_arguments_migrated");
    const unchanged = reportOf(await runToEnd(gen("v2m"), ["report", "mig-bad"]));
    expect(unchanged.report.pending[0]!.arguments).toEqual({ label: "" });
    // done once: a second pass finds its steps already current
    const again = JSON.parse((await cli("v2m", ["--json", "runs", "migrate", "--skill", "test.versioned"])).stdout);
    expect(byRun(again as MigrateJson, "mig-ok").outcome).toBe("current");

    // approved as migrated: the arguments run as they are (a second migration would have lost the name)
    const done = reportOf(
      await runToEnd(gen("v2m"), ["confirm", "mig-ok", JSON.stringify({ stepId: "p", decision: "approve" })]),
    );
    expect(done.report.status).toBe("completed");
    expect(done.report.steps.find((s) => s.stepId === "p")!.output).toEqual({ wrote: "p", gen: "v2m" });
  }, 300_000);

  test("it owns the database: --url is refused", async () => {
    const r = await cli("v2m", ["--url", "http://127.0.0.1:9", "runs", "migrate", "--skill", "test.versioned"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("runs migrate works on the database");
  }, 60_000);
});
