/**
 * README promises of the CLI about its database (CLI, "Remote mode" and the command table), on
 * child processes of the real CLI:
 * - the commands that own a database (`serve`, `worker`, `keys`, `prune`, `validate`, `demo`,
 *   `mcp`) refuse `--url` (exit 2, a usage message naming the command), before touching anything;
 * - `validate` never opens the embedded database: it validates with a data directory that does
 *   not exist (and does not create it), or is held by another process.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, test } from "vitest";
import { nodeArgs } from "./helpers/prebuilt.js";

interface Out {
  code: number | null;
  stdout: string;
  stderr: string;
}

const dir = mkdtempSync(path.join(tmpdir(), "tc-cli-local-"));
/** Storage nobody may open: no server, an embedded directory that must never be created. */
const neverDir = path.join(dir, "never-opened");
const env = {
  ...process.env,
  REDIS_URL: "",
  DATABASE_URL: "",
  TOOLCHAIN_URL: "",
  TOOLCHAIN_API_KEY: "",
  TOOLCHAIN_DATA_DIR: neverDir,
};

function cli(args: string[]): Promise<Out> {
  const proc = spawn(process.execPath, [...nodeArgs("src/cli/main.ts"), ...args], {
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => proc.kill("SIGKILL"), 120_000);
  return new Promise((resolve) => proc.on("exit", (code) => (clearTimeout(timer), resolve({ code, stdout, stderr }))));
}

const plan = path.join(dir, "plan.json");
writeFileSync(
  plan,
  JSON.stringify({
    steps: [
      { stepId: "a", skillName: "core.pass", arguments: { value: 1 } },
      { stepId: "b", skillName: "core.pass", dependsOn: ["a"], arguments: { value: 2 } },
    ],
  }),
);

describe("CLI commands that own a database", () => {
  const url = ["--url", "http://127.0.0.1:9", "--key", "tck_x"];
  const commands: [string, string[]][] = [
    ["serve", ["serve"]],
    ["worker", ["worker"]],
    ["keys", ["keys", "list"]],
    ["keys", ["keys", "create", "--workspace", "w"]],
    ["prune", ["prune"]],
    ["validate", ["validate", plan]],
    ["demo", ["demo"]],
    ["mcp", ["mcp"]],
  ];

  test("refuse --url with exit 2 and a message naming the command; nothing is opened", async () => {
    const outs = await Promise.all(commands.map(([, args]) => cli([...args, ...url])));
    outs.forEach((o, i) => {
      const name = commands[i]![0];
      expect([o.code, o.stderr.trim()], commands[i]![1].join(" ")).toEqual([
        2,
        `usage: ${name} works on the database (DATABASE_URL or the embedded one), not on a server: drop --url`,
      ]);
    });
    expect(existsSync(neverDir)).toBe(false);
  });

  test("validate never opens the embedded database (its directory is not even created)", async () => {
    const ok = await cli(["validate", plan]);
    expect([ok.code, ok.stdout.trim()], ok.stderr).toEqual([0, "valid: 2 steps; topological order: a, b"]);
    expect(existsSync(neverDir)).toBe(false);
  }, 120_000);
});
