/**
 * `npm start` as a user runs it: package.json's prestart bundles the server (scripts/bundle.ts)
 * and the server process runs that bundle with plain node and `--liftoff-only`, not tsx (README,
 * "Embedded footprint": ~90 MB of RSS for tsx, ~100 MB for optimised WASM code); and a bundle is
 * rebuilt exactly when one of its inputs changed, so a start after an edit runs the edit.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, expect, test } from "vitest";
import { bundleEntry } from "../scripts/bundle.js";
import { processTree } from "../bench/procs.js";
import { call } from "./helpers/api.js";
import { freshSchema, serverUrl } from "./helpers/backends.js";
import { seedDataDir } from "./helpers/prebuilt.js";
import { waitFor } from "./helpers/wait.js";

const cmdline = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  } catch {
    return [];
  }
};

const schema = freshSchema("start");
afterAll(async () => {
  if (!serverUrl) return;
  const pool = new pg.Pool({ connectionString: serverUrl, max: 1 });
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
  await pool.end();
});

test.runIf(process.platform === "linux")(
  "`npm start` serves from the bundle with plain node and --liftoff-only (no tsx in the server's process)",
  async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PORT: "0",
      TOOLCHAIN_DEV_KEY: "1",
      REDIS_URL: "",
      ...(serverUrl
        ? { TOOLCHAIN_SCHEMA: schema }
        : { DATABASE_URL: "", TOOLCHAIN_DATA_DIR: seedDataDir(mkdtempSync(path.join(tmpdir(), "tc-start-"))) }),
    };
    const npm = spawn("npm", ["start", "--silent"], { env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let err = "";
    npm.stderr.on("data", (d: Buffer) => (err += d.toString()));
    npm.stdout.on("data", (d: Buffer) => (err += d.toString()));
    try {
      await waitFor(
        () => {
          if (npm.exitCode !== null) throw new Error(`npm start exited: ${err}`);
          return /API key:\s+(tck_\S+)/.test(err);
        },
        { timeoutMs: 90_000, intervalMs: 50, what: "`npm start` printing its key" },
      );
      const server = processTree(npm.pid!)
        .map(cmdline)
        .find((c) => c.includes("serve"));
      expect(server).toBeDefined();
      expect(server!.slice(1, 3)).toEqual(["--liftoff-only", path.join(".cache", "dist", "src__cli__main.mjs")]);
      expect(server!.join(" ")).not.toContain("tsx");
      const url = /toolchain API on (http:\/\/\S+)/.exec(err)![1]!;
      const key = /API key:\s+(tck_\S+)/.exec(err)![1]!;
      const plan = { steps: [{ stepId: "a", skillName: "core.wait", arguments: { ms: 1, value: "done" } }] };
      expect((await call(url, "POST", "/api/tool-chains/run", { key, body: { plan } })).body.status).toBe("completed");
      const exited = new Promise<void>((r) => npm.once("exit", () => r()));
      process.kill(-npm.pid!, "SIGTERM");
      await exited;
    } finally {
      try {
        process.kill(-npm.pid!, "SIGKILL");
      } catch {
        /* gone */
      }
    }
  },
  120_000,
);

test("a bundle is built once, kept while its inputs are unchanged, and rebuilt when one of them changed", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "tc-bundle-"));
  const dep = path.join(dir, "dep.ts");
  const entry = path.join(dir, "entry.ts");
  writeFileSync(dep, "export const answer: number = 41;\n");
  writeFileSync(entry, 'import { answer } from "./dep.ts";\nconsole.log(answer);\n');
  const out = await bundleEntry(entry, path.join(dir, "out"));
  expect(readFileSync(out, "utf8")).toContain("41");
  const first = statSync(out).mtimeMs;
  // unchanged inputs: the same file, not written again
  expect(await bundleEntry(entry, path.join(dir, "out"))).toBe(out);
  expect(statSync(out).mtimeMs).toBe(first);
  // an input (not the entry) edited after the bundle was built: rebuilt with the edit
  writeFileSync(dep, "export const answer: number = 42;\n");
  const later = new Date(first + 5_000);
  utimesSync(dep, later, later);
  await bundleEntry(entry, path.join(dir, "out"));
  expect(readFileSync(out, "utf8")).toContain("42");
});
