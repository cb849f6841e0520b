/**
 * Builds the run console (console/src → console/dist) with esbuild: one ES module and one
 * stylesheet, minified, no source maps, so the output is byte-for-byte deterministic and is
 * committed (`npm start` serves it without build tools). `--check` builds in memory and fails
 * if the committed files differ (CI, test/console-model.test.ts).
 *
 *   npm run build:console            # write console/dist
 *   npm run build:console -- --check # verify console/dist is up to date
 */
import { readFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const CONSOLE_DIST = join(root, "console", "dist");

/** The bundle's files: name → content. */
export async function buildConsole(): Promise<Map<string, string>> {
  const common = {
    bundle: true,
    minify: true,
    write: false,
    logLevel: "silent",
    legalComments: "eof",
    charset: "utf8",
    absWorkingDir: root,
  } as const;
  const [js, css] = await Promise.all([
    build({
      ...common,
      entryPoints: [join(root, "console/src/main.ts")],
      format: "esm",
      target: ["es2022", "chrome110", "firefox110", "safari16"],
      outfile: join(CONSOLE_DIST, "console.js"),
    }),
    build({
      ...common,
      entryPoints: [join(root, "console/src/styles.css")],
      outfile: join(CONSOLE_DIST, "console.css"),
    }),
  ]);
  const out = new Map<string, string>();
  for (const f of [...js.outputFiles, ...css.outputFiles]) out.set(relative(CONSOLE_DIST, f.path), f.text);
  out.set("index.html", readFileSync(join(root, "console/index.html"), "utf8"));
  return out;
}

/** Names of committed files that differ from a fresh build. */
export async function staleConsoleFiles(): Promise<string[]> {
  const stale: string[] = [];
  for (const [name, text] of await buildConsole()) {
    let have: string | undefined;
    try {
      have = readFileSync(join(CONSOLE_DIST, name), "utf8");
    } catch {
      have = undefined;
    }
    if (have !== text) stale.push(name);
  }
  return stale;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes("--check")) {
    const stale = await staleConsoleFiles();
    if (stale.length) {
      console.error(`console/dist is out of date (${stale.join(", ")}): run npm run build:console and commit it`);
      process.exit(1);
    }
    console.log("console/dist is up to date");
  } else {
    await mkdir(CONSOLE_DIST, { recursive: true });
    for (const [name, text] of await buildConsole()) await writeFile(join(CONSOLE_DIST, name), text);
    console.log(
      `console/dist written (${[...(await buildConsole()).entries()].map(([n, t]) => `${n} ${(t.length / 1024).toFixed(1)} KiB`).join(", ")})`,
    );
  }
}
