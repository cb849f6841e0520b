/**
 * A file's size tells its scope (ARCHITECTURE.md): no production source file over 500 lines, no
 * file of the graph (graphs/) over 300. Imports run one way: `npm run circular` checks that.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { expect, test } from "vitest";

const root = join(import.meta.dirname, "..");
const LIMITS: [dir: string, max: number][] = [
  ["src", 500],
  ["graphs", 300],
  ["skills", 500],
  ["console/src", 500],
];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return /\.(ts|tsx|mts)$/.test(e.name) && !e.name.endsWith(".d.ts") ? [p] : [];
  });
}

test("no production file over 500 lines, no graph file over 300", () => {
  const over: string[] = [];
  let files = 0;
  for (const [dir, max] of LIMITS)
    for (const f of sources(join(root, dir))) {
      files++;
      const lines = readFileSync(f, "utf8").split("\n").length - 1;
      if (lines > max) over.push(`${relative(root, f)}: ${lines} lines (at most ${max})`);
    }
  expect(files).toBeGreaterThan(100);
  expect(over).toEqual([]);
});
