/**
 * Profile suite: where a chain step's CPU goes, this project against bare LangGraph `task()` on
 * the same saver (MemorySaver), from V8 CPU profiles taken in this process (node:inspector, the
 * same sampler as `--cpu-prof`). Each variant's profile is written to the bench output folder
 * (`BENCH_OUT`, default `.cache/bench`) as a `.cpuprofile` (Chrome DevTools / speedscope open it
 * as a flame graph), and summarised as JSON lines:
 *   profile.split     self time per step by owner: ours (src/, graphs/), LangGraph, its
 *                     checkpoint package, @langchain/core, langsmith, zod, GC, Node's own
 *   profile.diff      runtime − bare per owner, and the part of LangGraph's own difference that is
 *                     the SAME functions doing the same number of calls (costlier per call in a
 *                     larger heap) against functions only the runtime reaches
 *   profile.ours      our functions with the most self time per step
 *   profile.serialize the checkpoint serializer's inclusive time per step, by what it serialized
 *                     (a task's writes vs a checkpoint)
 * The profiler inflates both sides alike; read ratios and differences, not absolute times.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { repoRoot } from "../scripts/bundle.js";
import { bareTaskRun, runtimeRun, type Shape } from "./overhead.js";
import { emitLine, log, maybeGc, round } from "./timing.js";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

const ROOT = repoRoot(import.meta.url);

/**
 * A bundle's frames all carry the bundle's URL; esbuild marks where each input's code starts with
 * a `// path/of/input.js` line, so a frame's line names its source file (owner and frame key then
 * read as from an unbundled run). Function names are esbuild's (a clash renames `stringify` to
 * `stringify4`).
 */
const bundleMarks = new Map<string, { line: number; path: string }[]>();
function sourceFrame(f: CallFrame): CallFrame {
  if (!f.url.endsWith(".mjs") || !f.url.includes("/.cache/dist/")) return f;
  let marks = bundleMarks.get(f.url);
  if (!marks) {
    marks = [];
    const lines = readFileSync(fileURLToPath(f.url), "utf8").split("\n");
    for (let i = 0; i < lines.length; i++) {
      const m = /^\/\/ (\S+\.(?:ts|js|mjs|cjs))$/.exec(lines[i]!);
      if (m) marks.push({ line: i, path: m[1]! });
    }
    bundleMarks.set(f.url, marks);
  }
  let lo = 0;
  let hi = marks.length - 1;
  let at = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (marks[mid]!.line <= f.lineNumber) ((at = mid), (lo = mid + 1));
    else hi = mid - 1;
  }
  if (at < 0) return f;
  return { ...f, url: pathToFileURL(join(ROOT, marks[at]!.path)).href, lineNumber: f.lineNumber - marks[at]!.line };
}

export type Owner =
  "ours" | "langgraph" | "checkpoint" | "core" | "langsmith" | "zod" | "otherPackages" | "gc" | "node" | "idle";

/** Who a frame belongs to: a package under node_modules, this project's own code, or Node. */
export function ownerOf(f: CallFrame): Owner {
  if (f.functionName === "(idle)") return "idle";
  if (f.functionName === "(garbage collector)") return "gc";
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(f.url);
  if (m) {
    const pkg = m[1]!;
    if (pkg === "@langchain/langgraph") return "langgraph";
    if (pkg.startsWith("@langchain/langgraph-checkpoint")) return "checkpoint";
    if (pkg === "@langchain/core") return "core";
    if (pkg === "langsmith") return "langsmith";
    if (pkg === "zod") return "zod";
    // the checkpoint serializer's JSON writer is the checkpoint package's dependency
    if (pkg === "fast-safe-stringify") return "checkpoint";
    return "otherPackages";
  }
  const path = f.url.startsWith("file://") ? fileURLToPath(f.url) : f.url;
  if (path.startsWith(join(ROOT, "src")) || path.startsWith(join(ROOT, "graphs"))) return "ours";
  return "node"; // node: internals, natives, "(program)", the bench's own loop
}

/** Self microseconds per profile node. */
function selfTimes(p: CpuProfile): Map<number, number> {
  const t = new Map<number, number>();
  for (let i = 0; i < p.samples.length; i++) t.set(p.samples[i]!, (t.get(p.samples[i]!) ?? 0) + (p.timeDeltas[i] ?? 0));
  return t;
}

const frameKey = (f: CallFrame) =>
  `${f.functionName || "(anonymous)"} ${f.url.replace(/^.*node_modules\//, "")}:${f.lineNumber}`;

/** Self ms by owner, and by function (frame key) with its owner. */
export function summarise(p: CpuProfile) {
  const self = selfTimes(p);
  const byOwner = {} as Record<Owner, number>;
  const byFrame = new Map<string, { owner: Owner; ms: number }>();
  for (const n of p.nodes) {
    const us = self.get(n.id) ?? 0;
    if (!us) continue;
    const frame = sourceFrame(n.callFrame);
    const owner = ownerOf(frame);
    byOwner[owner] = (byOwner[owner] ?? 0) + us / 1000;
    const k = frameKey(frame);
    const e = byFrame.get(k) ?? { owner, ms: 0 };
    e.ms += us / 1000;
    byFrame.set(k, e);
  }
  return { byOwner, byFrame };
}

/**
 * Inclusive ms of the checkpoint serializer (`dumpsTyped`), split by the saver method that called
 * it: `putWrites` (a task's or node's writes) or `put` (a checkpoint).
 */
export function serializerTime(p: CpuProfile): Record<string, number> {
  const self = selfTimes(p);
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const inclusive = (id: number): number => {
    const n = byId.get(id)!;
    return (self.get(id) ?? 0) + (n.children ?? []).reduce((s, c) => s + inclusive(c), 0);
  };
  const out: Record<string, number> = {};
  for (const n of p.nodes) {
    if (n.callFrame.functionName !== "dumpsTyped") continue;
    // the nearest saver method above it names what was serialized
    let q = parent.get(n.id);
    let by = "other";
    while (q !== undefined) {
      const name = byId.get(q)!.callFrame.functionName;
      if (name === "putWrites" || name === "put") {
        by = name;
        break;
      }
      q = parent.get(q);
    }
    out[by] = (out[by] ?? 0) + inclusive(n.id) / 1000;
  }
  return out;
}

export async function profiled(run: () => Promise<unknown>, reps: number): Promise<CpuProfile> {
  const session = new Session();
  session.connect();
  try {
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: 100 });
    maybeGc();
    await session.post("Profiler.start");
    for (let r = 0; r < reps; r++) await run();
    const { profile } = (await session.post("Profiler.stop")) as { profile: CpuProfile };
    return profile;
  } finally {
    session.disconnect();
  }
}

/** A frame key with this project's path cut (`loop graphs/scheduler/index.ts:0`). */
export const shortFrame = (k: string) => k.replace(`${pathToFileURL(ROOT).href}/`, "");

export const perStep = (ms: number, steps: number) => round(ms / steps, 4);
export const perStepAll = (o: Partial<Record<string, number>>, steps: number) =>
  Object.fromEntries(Object.entries(o).map(([k, v]) => [k, perStep(v ?? 0, steps)]));

export async function profileSuite(opts: { quick: boolean }): Promise<void> {
  const shape: Shape = "chain";
  const n = opts.quick ? 200 : 1000;
  const reps = opts.quick ? 3 : 20;
  const outDir = resolve(process.env.BENCH_OUT ?? join(ROOT, ".cache", "bench"));
  mkdirSync(outDir, { recursive: true });
  const variants = { runtime: runtimeRun, bareTask: bareTaskRun } as const;
  const summaries = {} as Record<keyof typeof variants, ReturnType<typeof summarise>>;
  const serialize = {} as Record<keyof typeof variants, Record<string, number>>;
  for (const [name, run] of Object.entries(variants) as [
    keyof typeof variants,
    (typeof variants)[keyof typeof variants],
  ][]) {
    await run(Math.min(n, 200), shape); // warm-up (JIT), outside the profile
    const profile = await profiled(() => run(n, shape), reps);
    const file = join(outDir, `profile-${name}-${shape}-${n}.cpuprofile`);
    writeFileSync(file, JSON.stringify(profile));
    log(`profile: ${name} written to ${file}`);
    summaries[name] = summarise(profile);
    serialize[name] = serializerTime(profile);
    const { busy, total } = busyOf(summaries[name]);
    emitLine({
      suite: "profile",
      measure: "split",
      variant: name,
      shape,
      steps: n,
      runs: reps,
      file,
      msPerStep: { total: perStep(total, n * reps), ...perStepAll(busy, n * reps) },
    });
  }
  const steps = n * reps;
  const rt = summaries.runtime;
  const bare = summaries.bareTask;
  const owners = new Set([...Object.keys(rt.byOwner), ...Object.keys(bare.byOwner)].filter((o) => o !== "idle"));
  const diff: Record<string, number> = {};
  for (const o of owners) diff[o] = perStep((rt.byOwner[o as Owner] ?? 0) - (bare.byOwner[o as Owner] ?? 0), steps);
  // LangGraph's side (langgraph, checkpoint, core, langsmith): the same functions in both profiles,
  // and functions the runtime alone reaches
  const theirs = new Set<Owner>(["langgraph", "checkpoint", "core", "langsmith"]);
  let sameInBoth = 0;
  let runtimeOnly = 0;
  for (const [k, e] of rt.byFrame) {
    if (!theirs.has(e.owner)) continue;
    const b = bare.byFrame.get(k);
    if (b) sameInBoth += e.ms - b.ms;
    else runtimeOnly += e.ms;
  }
  emitLine({
    suite: "profile",
    measure: "diff",
    shape,
    steps: n,
    msPerStep: diff,
    langgraphSide: { sameFunctions: perStep(sameInBoth, steps), runtimeOnlyFunctions: perStep(runtimeOnly, steps) },
  });
  const ours = [...rt.byFrame].filter(([, e]) => e.owner === "ours").sort((a, b) => b[1].ms - a[1].ms);
  emitLine({
    suite: "profile",
    measure: "ours",
    shape,
    steps: n,
    top: ours.slice(0, 12).map(([k, e]) => ({ fn: shortFrame(k), msPerStep: perStep(e.ms, steps) })),
  });
  emitLine({
    suite: "profile",
    measure: "serialize",
    shape,
    steps: n,
    runtime: perStepAll(serialize.runtime, steps),
    bareTask: perStepAll(serialize.bareTask, steps),
  });
}

export type Summary = ReturnType<typeof summarise>;

/** A summary's busy time by owner (idle left out) and its total, in ms. */
export function busyOf(s: Summary): { busy: Record<string, number>; total: number } {
  const { idle: _idle, ...busy } = s.byOwner as Record<string, number>;
  return { busy, total: Object.values(busy).reduce((a, v) => a + v, 0) };
}

/**
 * What the runtime's profile adds to bare LangGraph's, as JSON lines of `suite`, in `unit` per
 * `per` (steps or runs): the busy time by owner (runtime − bare), the functions whose self time
 * grew most (everyone's), and our own functions with the most self time.
 */
export function emitRuntimeVsBare(
  suite: string,
  unit: string,
  per: number,
  runtime: Summary,
  bare: Summary,
  top = { grown: 20, ours: 15 },
): void {
  const [r, b] = [busyOf(runtime).busy, busyOf(bare).busy];
  const diff: Record<string, number> = {};
  for (const k of new Set([...Object.keys(r), ...Object.keys(b)])) diff[k] = (r[k] ?? 0) - (b[k] ?? 0);
  emitLine({ suite, measure: "runtime − bare", [unit]: perStepAll(diff, per) });
  const grown = [...runtime.byFrame]
    .map(([k, e]) => ({ fn: k, owner: e.owner, ms: e.ms - (bare.byFrame.get(k)?.ms ?? 0) }))
    .sort((x, y) => y.ms - x.ms)
    .slice(0, top.grown)
    .map((g) => ({ fn: shortFrame(g.fn), owner: g.owner, [unit]: perStep(g.ms, per) }));
  emitLine({ suite, measure: "grown most", top: grown });
  emitLine({ suite, measure: "ours", top: topFrames(runtime, "ours", top.ours, unit, per) });
}

/** The `count` functions of `owner` with the most self time, in `unit` per `per`. */
export const topFrames = (s: Summary, owner: Owner, count: number, unit: string, per: number) =>
  [...s.byFrame]
    .filter(([, e]) => e.owner === owner)
    .sort((x, y) => y[1].ms - x[1].ms)
    .slice(0, count)
    .map(([k, e]) => ({ fn: shortFrame(k), [unit]: perStep(e.ms, per) }));
