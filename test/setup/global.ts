/**
 * Built once per vitest run (globalSetup), before any test file, and removed after:
 * - the child processes' entry points bundled with esbuild: a child started from a bundle skips
 *   tsx's loader, per-file TypeScript transforms and module resolution (measured: a CLI `runs`
 *   took 3.0 s of CPU under tsx, 1.9 s from a bundle of our code, 1.2 s with its dependencies
 *   bundled too); test/helpers/prebuilt.ts `nodeArgs` picks the bundle, else falls back to tsx;
 * - embedded (no DATABASE_URL, engine PGlite): an initdb image (a dumped data directory) each test
 *   file's shared in-memory PGlite starts from (test/setup/shared-pglite.ts), and a data directory
 *   with every migration applied in schema "toolchain", which `freshDataDir`/`seedDataDir` copy for
 *   each test's processes (initdb in WASM costs seconds of CPU; a copy a fraction of a second).
 * Workers find them through TOOLCHAIN_TEST_BUILD (the bundles: a directory two levels below the
 * repository, like src/cli/, so their `import.meta.url`-relative paths, e.g. console/dist, still
 * resolve) and TOOLCHAIN_TEST_PGLITE (the embedded images, kept between runs; see pgliteImages).
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { PGlite } from "@electric-sql/pglite";
import path from "node:path";
import { build } from "esbuild";
import { openRuntime } from "../../src/runtime/open.js";
import { embeddedEngine } from "../../src/store/db.js";
import { bundleName, bundleOptions } from "../../scripts/bundle.js";
import { BUNDLED_ENTRIES } from "../helpers/prebuilt.js";

export default async function setup(): Promise<() => void> {
  const root = process.cwd();
  const dir = path.join(root, ".cache", `test-run-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const started = Date.now();
  await Promise.all([
    build(
      bundleOptions(
        Object.fromEntries(BUNDLED_ENTRIES.map((e) => [bundleName(e).replace(/\.mjs$/, ""), path.join(root, e)])),
        dir,
      ),
    ),
    (async () => {
      if (process.env.DATABASE_URL || embeddedEngine() !== "pglite") return;
      process.env.TOOLCHAIN_TEST_PGLITE = await pgliteImages(root);
    })(),
  ]);
  process.env.TOOLCHAIN_TEST_BUILD = dir;
  console.log(
    `test setup: child bundles${process.env.TOOLCHAIN_TEST_PGLITE ? ` and embedded images (${process.env.TOOLCHAIN_TEST_PGLITE})` : ""} in ${Date.now() - started} ms`,
  );
  return () => rmSync(dir, { recursive: true, force: true });
}

/**
 * The initdb image (each test file's shared in-memory PGlite starts from it) and, migrated, the
 * data directory children's storage is copied from. Kept in .cache/ between runs, under a hash of
 * what they are made of (dependencies, migrations): a fresh clone builds them once.
 */
async function pgliteImages(root: string): Promise<string> {
  const hash = createHash("sha256");
  const sources = [
    "package-lock.json",
    ...["src/store", "skills/qtable"].flatMap((d) =>
      readdirSync(path.join(root, d))
        .filter((f) => f.endsWith(".ts"))
        .sort()
        .map((f) => `${d}/${f}`),
    ),
  ];
  for (const f of sources) hash.update(f).update(readFileSync(path.join(root, f)));
  const dir = path.join(root, ".cache", `pglite-${hash.digest("hex").slice(0, 16)}`);
  if (existsSync(path.join(dir, "pglite-image.tar"))) return dir;
  const tmp = `${dir}.${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  const clean = await PGlite.create();
  const image = await clean.dumpDataDir("none");
  await clean.close();
  const template = path.join(tmp, "pglite-template");
  const seeded = await PGlite.create(template, { loadDataDir: image });
  await seeded.close();
  const o = await openRuntime({ dataDir: template, databaseUrl: "", schema: "toolchain", engine: "pglite" });
  await o.close();
  // the image last: its presence marks the directory complete
  writeFileSync(path.join(tmp, "pglite-image.tar"), Buffer.from(await image.arrayBuffer()));
  try {
    renameSync(tmp, dir);
  } catch {
    rmSync(tmp, { recursive: true, force: true }); // another run built it at the same time
  }
  // images of older sources are never used again (80 MB each)
  for (const old of readdirSync(path.dirname(dir)))
    if (/^pglite-[0-9a-f]{16}$/.test(old) && old !== path.basename(dir))
      rmSync(path.join(path.dirname(dir), old), { recursive: true, force: true });
  return dir;
}
