/**
 * The CLI as a terminal program: run data (goals, preview records, comments, errors, outputs) is
 * printed inert. Pure checks of the escaping and of every renderer, then the real CLI as a child
 * process: a run whose goal, arguments and error carry OSC 52 (clipboard), erase-line, C1 and
 * BIDI controls prints none of them raw, while `--json` prints the values exactly.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, test } from "vitest";
import { esc, terminalLine } from "../src/cli/escape.js";
import { RunModel } from "../src/cli/model.js";
import { confirmationLines, formatEvent, headerLine, previewText, runsTable, summaryLine } from "../src/cli/render.js";
import { outputLines } from "../src/cli/flow.js";
import { serverUrl, freshSchema } from "./helpers/backends.js";
import { nodeArgs, seedDataDir } from "./helpers/prebuilt.js";

const OSC52 = "\x1b]52;c;SGVsbG8=\x07";
const ERASE = "\r\x1b[2K";
const C1_CSI = "\u009b2K";
const RLO = "\u202e";
const hostile = `title${OSC52}${ERASE}${C1_CSI}${RLO}gnp.exe\nforged line`;
/** Any raw control a terminal acts on: C0 but newline, DEL, C1, BIDI controls, separators. */
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
const withoutOurSgr = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

describe("escaping (pure)", () => {
  test("esc shows every control as an escape; printable text, emoji and accents untouched", () => {
    expect(esc(hostile)).toBe("title\\u001b]52;c;SGVsbG8=\\u0007\\r\\u001b[2K\\u009b2K\\u202egnp.exe\\nforged line");
    expect(esc('Plan → ✔ é 😀 \\ "q"')).toBe('Plan → ✔ é 😀 \\ "q"');
    for (const c of [
      "\u0000",
      "\u007f",
      "\u0085",
      "\u061c",
      "\u200e",
      "\u200f",
      "\u2028",
      "\u2029",
      "\u202a",
      "\u2066",
      "\u2069",
      "\t",
    ])
      expect(RAW_CONTROL.test(esc(`a${c}b`)), JSON.stringify(c)).toBe(false);
  });
  test("terminalLine keeps only the CLI's own newlines and colour codes", () => {
    expect(terminalLine(`\x1b[1mbold\x1b[0m\nnext${OSC52}`)).toBe(
      "\x1b[1mbold\x1b[0m\nnext\\u001b]52;c;SGVsbG8=\\u0007",
    );
    expect(terminalLine("\x1b[2K\x1b[3F")).toBe("\\u001b[2K\\u001b[3F");
  });

  test("every renderer escapes run data; colour stays", () => {
    const st = { color: true };
    const m = RunModel.fromView({
      runId: "r1",
      status: "waiting_confirmation",
      createdAt: new Date(0).toISOString(),
      updatedAt: new Date(0).toISOString(),
      plan: { goal: hostile, steps: [{ stepId: "s", skillName: "core.pass", dependsOn: [], arguments: {} }] },
      steps: [
        {
          stepId: "s",
          skillName: "core.pass",
          dependsOn: [],
          status: "failed",
          attempts: 1,
          error: { code: "EXECUTION_FAILED", message: hostile },
        },
      ],
      pendingConfirmations: [],
    } as never);
    const pending = {
      stepId: "s",
      skillName: "qtable.task.records.create",
      arguments: { rows: [hostile] },
      preview: { table: { name: hostile, id: "t1" }, count: 1, records: [{ title: hostile, estimateDays: 2 }] },
    };
    const texts = [
      headerLine(m, { ...st, now: 1, width: 400, startedAt: 0 }),
      ...confirmationLines(pending as never, st),
      previewText({ other: hostile }),
      formatEvent({
        runId: "r1",
        seq: 1,
        type: "step_failed",
        stepId: "s",
        at: new Date(0).toISOString(),
        data: { error: { code: "EXECUTION_FAILED", message: hostile } },
      } as never),
      formatEvent({
        runId: "r1",
        seq: 2,
        type: "step_confirmed",
        stepId: "s",
        at: new Date(0).toISOString(),
        data: { decision: "approve", comment: hostile },
      } as never),
      ...runsTable(
        [
          {
            runId: "r1",
            status: "completed",
            stepCount: 1,
            createdAt: new Date(0).toISOString(),
            finishedAt: null,
            goal: hostile,
            planId: null,
          } as never,
        ],
        st,
      ),
      summaryLine(
        { runId: "r1", status: "failed", steps: [], error: { code: "EXECUTION_FAILED", message: hostile } } as never,
        st,
      ),
      ...outputLines({ result: { outputs: { s: hostile }, memory: {} } } as never, 1_000),
    ];
    for (const t of texts) {
      expect(RAW_CONTROL.test(withoutOurSgr(t)), JSON.stringify(t)).toBe(false);
      expect(
        t.split("\n").some((l) => l.startsWith("forged line")),
        t,
      ).toBe(false);
    }
    expect(texts.join("\n")).toContain("\\u001b]52;c;SGVsbG8=");
    expect(texts[0]).toContain("\x1b[2m"); // the CLI's own colour codes are kept
  });
});

describe(`the CLI prints run data inert (${serverUrl ? "server Postgres" : "embedded"})`, () => {
  const dir = mkdtempSync(path.join(tmpdir(), "tc-cli-esc-"));
  const storage: Record<string, string> = serverUrl
    ? { DATABASE_URL: serverUrl, TOOLCHAIN_SCHEMA: freshSchema("cliesc") }
    : { DATABASE_URL: "", TOOLCHAIN_DATA_DIR: seedDataDir(path.join(dir, "pglite")) };
  const cli = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const proc = spawn(process.execPath, [...nodeArgs("src/cli/main.ts"), ...args], {
        env: { ...process.env, REDIS_URL: "", TOOLCHAIN_URL: "", TOOLCHAIN_API_KEY: "", ...storage },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      proc.on("exit", (code) => resolve({ code, stdout, stderr }));
    });
  const planFile = path.join(dir, "hostile.json");
  writeFileSync(
    planFile,
    JSON.stringify({
      goal: hostile,
      steps: [
        { stepId: "ask", skillName: "core.pass", arguments: { value: { title: hostile } }, requireConfirmation: true },
        { stepId: "boom", skillName: "core.fail", arguments: { message: hostile }, retry: { maxAttempts: 1 } },
      ],
    }),
  );

  test("run (piped), show: no raw control from the run's data; --json: the values exactly", async () => {
    const run = await cli(["run", planFile, "--no-input"]);
    expect(run.code, run.stderr).toBe(3); // waits for "ask"
    expect(RAW_CONTROL.test(run.stdout), run.stdout).toBe(false);
    expect(run.stdout).toContain("\\u001b]52;c;SGVsbG8=\\u0007"); // the preview's argument, shown escaped
    expect(run.stdout).toContain("EXECUTION_FAILED: title\\u001b]52"); // boom's error in its event line
    expect(run.stdout.split("\n").some((l) => l.startsWith("forged line"))).toBe(false);
    const runId = /run ([0-9a-f-]{36})/.exec(run.stdout)![1]!;

    const show = await cli(["show", runId]);
    expect(show.code, show.stderr).toBe(0);
    expect(RAW_CONTROL.test(show.stdout), show.stdout).toBe(false);
    expect(show.stdout).toContain("\\u202egnp.exe\\nforged line");

    const json = await cli(["show", runId, "--json"]);
    const view = JSON.parse(json.stdout);
    expect(view.plan.goal).toBe(hostile);
    expect(view.pendingConfirmations[0].arguments).toEqual({ value: { title: hostile } });
    expect(view.steps.find((s: { stepId: string }) => s.stepId === "boom").error.message).toContain(hostile);
  }, 120_000);
});
