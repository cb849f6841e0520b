/** Spawning runtime processes (test/fixtures/crash-child.ts) and reading their JSON lines. */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { freshSchema, serverUrl } from "./backends.js";
import { freshDataDir, nodeArgs } from "./prebuilt.js";

export { freshDataDir, nodeArgs };

export interface Child {
  proc: ChildProcess;
  lines: Record<string, unknown>[];
  /** Resolves with the first line matching, rejects if the process exits first or on timeout. */
  waitFor(pred: (l: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  exited: Promise<number | null>;
  stderr: () => string;
}

export interface ChildEnv {
  env: Record<string, string>;
  schema: string;
}

/** Storage shared by the processes of one test: a fresh schema on the server, or a fresh embedded data dir. */
export function sharedStorage(): ChildEnv {
  const schema = serverUrl ? freshSchema("crash") : "toolchain";
  const env: Record<string, string> = { TOOLCHAIN_SCHEMA: schema, LEASE_TTL_MS: "1000" };
  if (serverUrl) env.DATABASE_URL = serverUrl;
  else env.TOOLCHAIN_DATA_DIR = freshDataDir();
  return { env, schema };
}

export function spawnChild(
  storage: ChildEnv,
  args: string[],
  extraEnv: Record<string, string> = {},
  script = "test/fixtures/crash-child.ts",
): Child {
  const proc = spawn(process.execPath, [...nodeArgs(script), ...args], {
    env: { ...process.env, ...(serverUrl ? {} : { DATABASE_URL: "" }), ...storage.env, ...extraEnv },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: Record<string, unknown>[] = [];
  const waiters: { pred: (l: Record<string, unknown>) => boolean; resolve: (l: Record<string, unknown>) => void }[] =
    [];
  let buf = "";
  let err = "";
  proc.stdout!.on("data", (d: Buffer) => {
    buf += d.toString();
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      const raw = buf.slice(0, i);
      buf = buf.slice(i + 1);
      let l: Record<string, unknown>;
      try {
        l = JSON.parse(raw);
      } catch {
        continue;
      }
      lines.push(l);
      for (const w of [...waiters])
        if (w.pred(l)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(l);
        }
    }
  });
  proc.stderr!.on("data", (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((r) => proc.on("exit", (code) => r(code)));
  return {
    proc,
    lines,
    exited,
    stderr: () => err,
    waitFor(pred, timeoutMs = 60_000) {
      const hit = lines.find(pred);
      if (hit) return Promise.resolve(hit);
      return new Promise((resolve, reject) => {
        const t = setTimeout(
          () =>
            reject(
              new Error(
                `timeout waiting for a line; got ${JSON.stringify(lines).slice(-1500)} stderr: ${err.slice(-1500)}`,
              ),
            ),
          timeoutMs,
        );
        waiters.push({ pred, resolve: (l) => (clearTimeout(t), resolve(l)) });
        void exited.then(() =>
          setTimeout(
            () =>
              reject(
                new Error(
                  `process exited before the line; got ${JSON.stringify(lines).slice(-1500)} stderr: ${err.slice(-2000)}`,
                ),
              ),
            50,
          ),
        );
      });
    },
  };
}

export async function runToEnd(
  storage: ChildEnv,
  args: string[],
  timeoutMs = 60_000,
  script?: string,
): Promise<Record<string, unknown>[]> {
  const c = spawnChild(storage, args, {}, script);
  const t = setTimeout(() => c.proc.kill("SIGKILL"), timeoutMs);
  await c.exited;
  clearTimeout(t);
  const e = c.lines.find((l) => "error" in l);
  if (e) throw new Error(`child failed: ${String(e.error)}\n${c.stderr().slice(-2000)}`);
  return c.lines;
}
