/** The CLI in a real pseudo-terminal (`script` from util-linux), answering as its output arrives. */
import { spawn } from "node:child_process";
import { nodeArgs } from "./prebuilt.js";

export const stripAnsi = (s: string) => s.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, "");

/** Each step: when the output (since the previous step) matches `when`, `then` runs with it. */
export interface Step {
  when: RegExp;
  then: (write: (s: string) => void, output: string) => void | Promise<void>;
}

export function pty(args: string[], steps: Step[]): Promise<{ code: number | null; stdout: string }> {
  const cmd = `stty cols 120 rows 40; exec ${[process.execPath, ...nodeArgs("src/cli/main.ts"), ...args].map((a) => `'${a.replace(/'/g, "'\\''")}'`).join(" ")}`;
  const proc = spawn("script", ["-qfec", cmd, "/dev/null"], {
    env: { ...process.env, TERM: "xterm-256color", TOOLCHAIN_URL: "", TOOLCHAIN_API_KEY: "", NO_COLOR: "1" },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stdout = "";
  let done = 0;
  let from = 0;
  proc.stdout.on("data", (d: Buffer) => {
    stdout += d.toString();
    const next = steps[done];
    if (next && next.when.test(stdout.slice(from))) {
      done++;
      from = stdout.length;
      void next.then((s) => proc.stdin.write(s), stdout);
    }
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 120_000);
  return new Promise((resolve) =>
    proc.on("exit", (code) => (clearTimeout(timer), proc.stdin.end(), resolve({ code, stdout }))),
  );
}
