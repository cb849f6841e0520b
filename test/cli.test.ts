/**
 * `toolchain run | approve | reject | runs | show | plan` as people and scripts meet them: child
 * processes of the real CLI, piped (one line per event, --json, exit codes), in a pseudo-terminal
 * (`script` from util-linux: the tree redrawn in place, the confirmation prompt answered on
 * stdin), and against a real API server with --url/--key (the same output as in-process).
 * Exit codes: 0 completed, 1 another end, 2 usage or coded error, 3 waiting for confirmation.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { openRuntime, type OpenedRuntime } from "../src/runtime/open.js";
import { PgAccessStore } from "../src/store/pg-access-store.js";
import { newKey, serveApi, type ApiUnderTest } from "./helpers/api.js";
import { freshSchema, serverUrl } from "./helpers/backends.js";
import { nodeArgs, seedDataDir } from "./helpers/prebuilt.js";

interface Out {
  code: number | null;
  stdout: string;
  stderr: string;
}

const dir = mkdtempSync(path.join(tmpdir(), "tc-cli2-"));
const schema = serverUrl ? freshSchema("cli2") : "toolchain";
const storage: Record<string, string> = serverUrl
  ? { DATABASE_URL: serverUrl, TOOLCHAIN_SCHEMA: schema }
  : { DATABASE_URL: "", TOOLCHAIN_DATA_DIR: seedDataDir(path.join(dir, "pglite")), TOOLCHAIN_SCHEMA: schema };
const demoSchema = serverUrl ? freshSchema("cli2demo") : "toolchain";
const serverSchema = serverUrl ? freshSchema("cli2srv") : "toolchain";
const demoStorage: Record<string, string> = serverUrl
  ? { TOOLCHAIN_SCHEMA: demoSchema }
  : { TOOLCHAIN_DATA_DIR: seedDataDir(path.join(dir, "demo-pglite")) };
const baseEnv = () => ({
  ...process.env,
  REDIS_URL: "",
  TOOLCHAIN_URL: "",
  TOOLCHAIN_API_KEY: "",
  NO_COLOR: "",
  ...storage,
});

/** The CLI in a child: its prebuilt bundle (test/helpers/prebuilt.ts), or `bin` (what `npx toolchain` runs). */
function cli(args: string[], env: Record<string, string> = {}, bin?: "src/cli/bin.js"): Promise<Out> {
  const proc = spawn(process.execPath, [...(bin ? [bin] : nodeArgs("src/cli/main.ts")), ...args], {
    env: { ...baseEnv(), ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => proc.kill("SIGKILL"), 240_000);
  return new Promise((resolve) => proc.on("exit", (code) => (clearTimeout(timer), resolve({ code, stdout, stderr }))));
}

/**
 * The CLI in a pseudo-terminal (`script -qfec`): `answers` are typed (with Enter) each time the
 * output shows the matching prompt text; the output is everything the terminal received.
 */
function pty(
  args: string[],
  answers: { when: RegExp; type: string }[],
  env: Record<string, string> = {},
): Promise<Out> {
  const cmd = `stty cols 120 rows 40; exec ${[process.execPath, ...nodeArgs("src/cli/main.ts"), ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ")}`;
  const proc = spawn("script", ["-qfec", cmd, "/dev/null"], {
    env: { ...baseEnv(), TERM: "xterm-256color", ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let answered = 0;
  // each answer is typed once its prompt appears after the previous answer was typed
  let from = 0;
  proc.stdout.on("data", (d: Buffer) => {
    stdout += d.toString();
    const next = answers[answered];
    if (next && next.when.test(stdout.slice(from))) {
      answered++;
      from = stdout.length;
      proc.stdin.write(`${next.type}\r`);
    }
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 240_000);
  return new Promise((resolve) =>
    proc.on("exit", (code) => (clearTimeout(timer), proc.stdin.end(), resolve({ code, stdout, stderr: "" }))),
  );
}

function file(name: string, value: unknown): string {
  const p = path.join(dir, name);
  writeFileSync(p, JSON.stringify(value));
  return p;
}

/** Lines without what differs between two runs of one plan: times, ids, durations, where it ran. */
function normalized(s: string): string[] {
  return s
    .split("\n")
    .map((l) =>
      l
        .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<run>")
        .replace(/\d\d:\d\d:\d\d\.\d{3}/g, "<time>")
        .replace(/\d+(\.\d+)? (ms|s)\b/g, "<dur>")
        .replace(/^(run <run>) · .*$/, "$1")
        .replace(/ --url \S+( --key <key>)?/g, "")
        .trimEnd(),
    )
    .filter(Boolean);
}

const stripAnsi = (s: string) => s.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "");

// fetch (300 ms) → left (600 ms) ‖ right (200 ms) → join (asks for confirmation)
const tree = file("tree.json", {
  goal: "tree demo",
  steps: [
    { stepId: "fetch", skillName: "core.wait", arguments: { ms: 300, value: { n: 1 } } },
    { stepId: "left", skillName: "core.wait", dependsOn: ["fetch"], arguments: { ms: 600, value: 2 } },
    { stepId: "right", skillName: "core.wait", dependsOn: ["fetch"], arguments: { ms: 200, value: 3 } },
    {
      stepId: "join",
      skillName: "core.pass",
      dependsOn: ["left", "right"],
      arguments: { value: { $ref: "steps.left" } },
      requireConfirmation: true,
    },
  ],
});
const good = file("good.json", {
  steps: [
    { stepId: "a", skillName: "core.pass", arguments: { value: { n: 1 } } },
    {
      stepId: "b",
      skillName: "core.pass",
      dependsOn: ["a"],
      arguments: { value: { $ref: "steps.a.n" } },
      requireConfirmation: true,
    },
  ],
});
const failing = file("failing.json", {
  steps: [{ stepId: "x", skillName: "core.fail", arguments: { code: "EXECUTION_FAILED" }, retry: { maxAttempts: 1 } }],
});
const edited = file("edited-arguments.json", { value: 42 });
// two confirmations in parallel, for the prompt asked twice
const twoApprovals = file("two.json", {
  steps: [
    { stepId: "p1", skillName: "core.pass", arguments: { value: 1 }, requireConfirmation: true },
    { stepId: "p2", skillName: "core.pass", arguments: { value: 2 }, requireConfirmation: true },
  ],
});

afterAll(async () => {
  if (!serverUrl) return;
  const pool = new pg.Pool({ connectionString: serverUrl, max: 1 });
  for (const s of [schema, demoSchema, serverSchema])
    await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
  await pool.end();
});

let localTreeRun: Out | undefined;

describe(`toolchain CLI, piped (${serverUrl ? "server Postgres" : "embedded"})`, () => {
  test("run waits (exit 3) with one line per event and how to decide; approve with edited arguments completes it (exit 0); show draws steps, timeline and events", async () => {
    const r = await cli(["run", tree, "--no-input"]);
    localTreeRun = r;
    expect(r.code).toBe(3);
    const runId = /^run (\S+) · embedded|^run (\S+) · Postgres/m.exec(r.stdout)!.slice(1).find(Boolean)!;
    // one line per event, in order, nothing redrawn on a pipe
    expect(r.stdout).not.toContain("\x1b[");
    const types = [...r.stdout.matchAll(/^#\s*\d+ \d\d:\d\d:\d\d\.\d{3} (\w+)/gm)].map((m) => m[1]);
    expect(types).toEqual([
      "planning_started",
      "planning_completed",
      "step_started",
      "step_completed",
      "step_started",
      "step_started",
      "step_completed",
      "step_completed",
      "step_waiting_confirmation",
      "run_waiting_confirmation",
    ]);
    expect(r.stdout).toMatch(/step_started\s+fetch\s+attempt 1 · core\.wait/);
    expect(r.stdout).toContain('Step "join" (core.pass) waits for confirmation.');
    expect(r.stdout).toMatch(/Resolved arguments:\n {2}\{\n {4}"value": 2\n {2}\}/);
    expect(r.stdout).toContain(`npx toolchain approve ${runId} join    # or: reject`);
    expect(r.stdout).toMatch(
      new RegExp(`run ${runId} waiting confirmation in .* · 3 completed, 1 waiting confirmation`),
    );

    const a = await cli(["approve", runId, "join", "--arguments", edited, "--comment", "checked", "--json"]);
    expect(a.code).toBe(0);
    const view = JSON.parse(a.stdout);
    expect(view).toMatchObject({
      runId,
      status: "completed",
      result: { outputs: { fetch: { n: 1 }, left: 2, right: 3, join: 42 } },
    });

    const s = await cli(["show", runId]);
    expect(s.code).toBe(0);
    const out = s.stdout;
    expect(out).toMatch(new RegExp(`^run ${runId} · completed · 4/4 steps done`));
    // the steps as a tree: fetch at the root, left and right under it, join under the deeper of them
    expect(out).toMatch(
      /Steps\n {2}✔ fetch +core\.wait +completed +attempt 1 +\d+ ms\n {2}├─ ✔ left .*\n {2}└─ ✔ right .*\n {5}└─ ✔ join .*approved by \S+: checked · after left/,
    );
    // the timeline: one bar per step on one axis, the confirmation wait as ░ before join ran
    const timeline = out.slice(out.indexOf("Timeline"), out.indexOf("Events ("));
    expect(timeline).toMatch(/ {2}fetch +[·█]*█[·█]* /);
    expect(timeline).toMatch(/ {2}join +·*░+█+·* /);
    expect(out).toMatch(/Events \(14\)\n(.*\n){9} {2}# 10 .*run_waiting_confirmation/);
    expect(out).toMatch(/# 11 .*step_confirmed +join +approve: checked/);

    const sj = JSON.parse((await cli(["show", runId, "--json"])).stdout);
    expect(sj).toMatchObject({ runId, status: "completed", steps: expect.any(Array) });
    expect(sj.events.map((e: { seq: number }) => e.seq)).toEqual(Array.from({ length: 14 }, (_, i) => i + 1));
  }, 600_000);

  test("--request plans then runs, --yes approves; a failure exits 1, a rejection exits 1; runs lists them newest first and filters by status", async () => {
    const planned = await cli([
      "run",
      "--request",
      "Plan an approval system, estimate the effort and put the tasks into the current table",
      "--context",
      '{"table":{"id":"Tasks"},"startDate":"2026-12-07"}',
      "--yes",
      "--json",
    ]);
    expect(planned.code).toBe(0);
    const pv = JSON.parse(planned.stdout);
    expect(pv).toMatchObject({ status: "completed", planning: { kind: "fallback" } });
    expect(pv.steps.map((s: { stepId: string; status: string }) => `${s.stepId}:${s.status}`)).toEqual([
      "split:completed",
      "estimate:completed",
      "schema:completed",
      "gantt:completed",
      "create:completed",
    ]);

    const f = await cli(["run", failing]);
    expect(f.code).toBe(1);
    expect(f.stdout).toMatch(/step_failed +x +EXECUTION_FAILED: /);
    expect(f.stdout).toMatch(/run \S+ failed in .* · 1 failed · EXECUTION_FAILED/);

    const w = await cli(["run", good, "--json"]);
    expect(w.code).toBe(3);
    const waiting = JSON.parse(w.stdout);
    expect(waiting).toMatchObject({
      status: "waiting_confirmation",
      pendingConfirmations: [{ stepId: "b", arguments: { value: 1 } }],
    });
    const rej = await cli(["reject", waiting.runId, "b", "--comment", "not now"]);
    expect(rej.code).toBe(1);
    expect(rej.stdout).toMatch(/step_confirmed +b +reject: not now/);
    expect(rej.stdout).toMatch(/run \S+ failed in .*REJECTED/);
    const again = await cli(["approve", waiting.runId, "b"]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(
      `CONFIRMATION_NOT_PENDING: step "b" of run ${waiting.runId} is not waiting for confirmation`,
    );

    const list = await cli(["runs"]);
    expect(list.code).toBe(0);
    const lines = list.stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^RUN +STATUS +STEPS +CREATED \(UTC\) +TOOK +GOAL$/);
    // newest first: the rejected run, the failed one, the planned one, the tree run of the first test (when it ran)
    expect(lines[1]).toMatch(new RegExp(`^${waiting.runId} +failed +2 `));
    expect(lines[2]).toMatch(/ failed +1 /);
    expect(lines[3]).toMatch(new RegExp(`^${pv.runId} +completed +5 .*Plan an approval system`));
    const failedOnly = JSON.parse((await cli(["runs", "--status", "failed", "--json"])).stdout);
    expect(failedOnly.runs.map((r: { status: string }) => r.status)).toEqual(["failed", "failed"]);
    expect(failedOnly.runs[0].runId).toBe(waiting.runId);
  }, 600_000);

  test("demo: the approval-system chain stops at the records (left waiting: exit 0, nothing written); --approve writes them", async () => {
    // storage of its own: the other tests write records into workspace "local"'s Tasks table too
    const waiting = await cli(["demo", "--no-input"], demoStorage);
    expect(waiting.code).toBe(0);
    expect(waiting.stdout).toMatch(/step_waiting_confirmation +create/);
    expect(waiting.stdout).toMatch(/^\d+ records to create in table "Tasks" \(tbl_\w+\):$/m);
    expect(waiting.stdout).toMatch(/Left waiting: run \S+\./);
    expect(waiting.stdout).not.toMatch(/tck_/); // the key is referred to by its file, never printed

    const n = Number(/^(\d+) records to create/m.exec(waiting.stdout)![1]);

    const approved = await cli(["demo", "--approve"], demoStorage);
    expect(approved.code).toBe(0);
    expect(approved.stdout).toMatch(/step_completed +create/);
    expect(approved.stdout).toMatch(/run \S+ completed in .* · 5 completed/);
    // only the approved run wrote: the table holds one chain's records, not two
    expect(approved.stdout).toMatch(new RegExp(`^table "Tasks" now holds ${n} records`, "m"));
  }, 600_000);

  test("src/cli/bin.js, the package's bin, starts the CLI from its TypeScript source (tsx)", async () => {
    const help = await cli(["--help"], {}, "src/cli/bin.js");
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^ {2}run \[options\] \[plan\] +run a plan \(or a request\) with live progress$/m);
  }, 120_000);

  test("usage errors exit 2 with a message; coded errors print CODE: message (and {error} with --json)", async () => {
    const help = await cli(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^ {2}run \[options\] \[plan\] +run a plan \(or a request\) with live progress$/m);
    expect(help.stdout).toContain(
      "2 usage error or coded error (CODE: message on stderr), 3 the run waits for a confirmation.",
    );
    const none = await cli(["run"]);
    expect([none.code, none.stderr.trim()]).toEqual([
      2,
      'usage: run: give a plan file (toolchain run plan.json) or --request "…"',
    ]);
    const both = await cli(["run", good, "--request", "x"]);
    expect([both.code, both.stderr.trim()]).toEqual([2, "usage: run: give a plan file or --request, not both"]);
    const missing = await cli(["approve", "only-a-run-id"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("error: missing required argument 'stepId'");
    const status = await cli(["runs", "--status", "done"]);
    expect(status.code).toBe(2);
    expect(status.stderr).toContain("usage: --status: unknown status done");
    const noKey = await cli(["runs", "--url", "http://127.0.0.1:9"]);
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toContain("--url needs an API key");
    const nf = await cli(["show", "run_missing", "--json"]);
    expect(nf.code).toBe(2);
    expect(JSON.parse(nf.stdout)).toEqual({ error: { code: "RUN_NOT_FOUND", message: "run run_missing not found" } });
    expect(nf.stderr.trim()).toBe("RUN_NOT_FOUND: run run_missing not found");
  }, 600_000);
});

describe("toolchain CLI in a pseudo-terminal", () => {
  test("the step tree is redrawn in place as events arrive; the prompt shows the arguments and takes the answer from stdin", async () => {
    const r = await pty(
      ["run", tree],
      [{ when: /Decide "join": \[y\] approve {2}\[n\] reject {2}\[Enter\] leave it waiting/, type: "y" }],
    );
    expect(r.code).toBe(0);
    // redrawn in place: back up over the previous frame (header + 4 steps) and rewrite it
    expect(r.stdout).toContain("\x1b[5F\x1b[2K");
    const frames = stripAnsi(r.stdout).split(/\r?\n(?=run \S+ · )/);
    expect(frames.length).toBeGreaterThan(4);
    // some frame shows left still running while right is done (the two ran in parallel)
    expect(
      frames.some((f) => /▶ left +core\.wait +running +attempt 1/.test(f) && /✔ right +core\.wait +completed/.test(f)),
    ).toBe(true);
    const plain = stripAnsi(r.stdout);
    expect(plain).toMatch(/\? join +core\.pass +waiting confirmation +waiting for confirmation · after left/);
    expect(plain).toMatch(/Resolved arguments:\r?\n {2}\{\r?\n {4}"value": 2/);
    expect(plain).toContain('Approving "join"…');
    // after the answer: the tree again, to the end
    const after = plain.slice(plain.indexOf("Approving"));
    expect(after).toMatch(/· completed · 4\/4 steps done/);
    expect(after).toMatch(/✔ join +core\.pass +completed/);
    expect(plain).toMatch(/run \S+ completed in .* · 4 completed/);
    // the cursor is shown again at the end
    expect(r.stdout.lastIndexOf("\x1b[?25h")).toBeGreaterThan(r.stdout.lastIndexOf("\x1b[?25l"));
  }, 300_000);

  test("two confirmations: rejecting one asks for the other; Enter leaves it waiting (exit 3)", async () => {
    const r = await pty(
      ["run", twoApprovals],
      [
        { when: /Decide "p1"/, type: "n" },
        { when: /Decide "p2"/, type: "" },
      ],
    );
    expect(r.code).toBe(3);
    const plain = stripAnsi(r.stdout);
    expect(plain).toContain('Rejecting "p1"…');
    expect(plain).toMatch(/✖ p1 +core\.pass +failed +REJECTED/);
    expect(plain).toMatch(/Run \S+ still waits for confirmation of "p2" \(left waiting\)/);
  }, 300_000);
});

describe("toolchain CLI against a running server (--url, --key)", () => {
  let opened: OpenedRuntime;
  let api: ApiUnderTest;
  let key: string;
  beforeAll(async () => {
    // the server's own storage: the CLI touches no database in this mode
    opened = await openRuntime(
      serverUrl
        ? { databaseUrl: serverUrl, schema: serverSchema, poolSize: 2 }
        : { dataDir: seedDataDir(path.join(dir, "server-pglite")), schema: "toolchain" },
    );
    const access = new PgAccessStore(opened.db);
    api = await serveApi(opened.runtime, opened.db, { access });
    key = await newKey(access, "remote");
  }, 300_000);
  afterAll(async () => {
    await api?.close();
    await opened?.close();
  });

  test("run, approve, show, runs, skills and plan over the REST API and SSE, with the same output as in-process; a bad key is UNAUTHORIZED (exit 2)", async () => {
    const r = await cli(["run", tree, "--no-input", "--url", api.url, "--key", key]);
    expect(r.code).toBe(3);
    expect(r.stdout).toMatch(new RegExp(`^run \\S+ · ${api.url.replace(/[.]/g, "\\.")}$`, "m"));
    const runId = /^run (\S+) · /m.exec(r.stdout)![1]!;
    // the same lines as the in-process run of the same plan (times, ids and durations aside)
    if (localTreeRun) expect(normalized(r.stdout)).toEqual(normalized(localTreeRun.stdout));
    expect(r.stdout).toContain(`npx toolchain approve ${runId} join --url ${api.url} --key <key>    # or: reject`);
    expect((await api.runtime.getRun(runId)).status).toBe("waiting_confirmation");

    // the key from the environment, the URL as a flag
    const a = await cli(["approve", runId, "join", "--url", api.url], { TOOLCHAIN_API_KEY: key });
    expect(a.code).toBe(0);
    expect(a.stdout).toMatch(/# 11 .*step_confirmed +join +approve/);
    expect(a.stdout).toMatch(/# 14 .*run_completed/);
    expect(a.stdout).toMatch(new RegExp(`run ${runId} completed in .* · 4 completed`));

    const s = await cli(["show", runId], { TOOLCHAIN_URL: api.url, TOOLCHAIN_API_KEY: key });
    expect(s.code).toBe(0);
    expect(s.stdout).toMatch(/└─ ✔ join +core\.pass +completed/);
    expect(s.stdout).toContain("Events (14)");

    const runs = JSON.parse((await cli(["runs", "--json"], { TOOLCHAIN_URL: api.url, TOOLCHAIN_API_KEY: key })).stdout);
    expect(runs.runs.map((x: { runId: string; status: string }) => [x.runId, x.status])).toEqual([
      [runId, "completed"],
    ]);

    const failed = await cli(["run", failing, "--json", "--url", api.url, "--key", key]);
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stdout)).toMatchObject({ status: "failed", error: { code: "EXECUTION_FAILED" } });

    const remote = { TOOLCHAIN_URL: api.url, TOOLCHAIN_API_KEY: key };
    const skills = await cli(["skills", "--json"], remote);
    expect(skills.code).toBe(0);
    expect(JSON.parse(skills.stdout).map((x: { name: string }) => x.name)).toContain("qtable.task.records.create");

    // plan on the server, written to a file, then run from it
    const planFile = path.join(dir, "planned.json");
    const planned = await cli(
      [
        "plan",
        "--request",
        "Plan an approval system and put the tasks into the current table",
        "--context",
        '{"table":{"id":"Tasks"}}',
        "--out",
        planFile,
      ],
      remote,
    );
    expect(planned.code).toBe(0);
    expect(planned.stdout).toMatch(/^planned by the fallback planner/);
    expect(planned.stdout).toMatch(/└─ create +qtable\.task\.records\.create +asks for confirmation · after schema/);
    expect(planned.stdout).toContain(`written to ${planFile}; run it: npx toolchain run ${planFile}`);
    const fromFile = JSON.parse(readFileSync(planFile, "utf8"));
    expect(fromFile.steps.map((x: { stepId: string }) => x.stepId)).toEqual([
      "split",
      "estimate",
      "schema",
      "gantt",
      "create",
    ]);

    const bad = await cli(["runs", "--url", api.url, "--key", "tck_wrong"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim()).toBe("UNAUTHORIZED: unknown or revoked API key");
  }, 600_000);
});
