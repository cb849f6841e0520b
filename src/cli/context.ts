/**
 * What every command shares: the global flags (`--url`, `--key`, `--json`), where output goes,
 * and the backend they act on (this process's runtime, or a server).
 */
import type { Command } from "commander";
import { openRuntime, type OpenedRuntime } from "../runtime/open.js";
import { LocalBackend, LOCAL_WORKSPACE, type Backend } from "./backend.js";
import { terminalLine } from "./escape.js";
import { usage } from "./exit.js";
import type { Io } from "./flow.js";
import { Progress, progressMode, styleFor, type Out } from "./live.js";
import { RemoteBackend } from "./remote.js";
import type { Style } from "./render.js";

export interface GlobalFlags {
  url?: string;
  key?: string;
  json?: boolean;
}

export interface Ctx {
  json: boolean;
  /** From --url or TOOLCHAIN_URL: the commands that can act on a server do. */
  url: string | undefined;
  key: string | undefined;
  /** --url was given on the command line (refused by commands that only work on a database). */
  urlFlag: boolean;
  stdout: Out;
  style: Style;
  /** Opens the runtime on the database (with the embedding program's skills: src/cli/program.ts). */
  openRuntime(): Promise<OpenedRuntime>;
  out(line: string): void;
}

export function makeCtx(
  flags: GlobalFlags,
  stdout: Out = process.stdout,
  onRuntime?: (opened: OpenedRuntime) => Promise<void> | void,
): Ctx {
  const url = flags.url ?? (process.env.TOOLCHAIN_URL || undefined);
  const json = Boolean(flags.json);
  return {
    json,
    url,
    key: flags.key ?? (process.env.TOOLCHAIN_API_KEY || undefined),
    urlFlag: flags.url !== undefined,
    stdout,
    openRuntime: async () => {
      const opened = await openRuntime();
      try {
        await onRuntime?.(opened);
      } catch (e) {
        await opened.close();
        throw e;
      }
      return opened;
    },
    style: json ? { color: false } : styleFor(stdout),
    // human output: run data was escaped where it was put into lines; this is the last line of defence
    out: (line) => void stdout.write(`${terminalLine(line)}\n`),
  };
}

/** Print a JSON document (the machine-readable answer of every command with --json). */
export function printJson(ctx: Ctx, value: unknown): void {
  ctx.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export async function openBackend(ctx: Ctx, workspace?: string): Promise<Backend> {
  if (ctx.url) {
    if (!/^https?:\/\//.test(ctx.url)) throw usage(`--url: expected http://… or https://…, got "${ctx.url}"`);
    if (!ctx.key)
      throw usage("--url needs an API key: --key <key> or TOOLCHAIN_API_KEY (the local one is in .data/local-api-key)");
    if (workspace) throw usage("--workspace: with --url the key's workspace is used");
    return new RemoteBackend(ctx.url, ctx.key);
  }
  return new LocalBackend(await ctx.openRuntime(), workspace ?? (process.env.TOOLCHAIN_WORKSPACE || LOCAL_WORKSPACE));
}

/** Commands that open the database themselves (serve, worker, keys, …) refuse an explicit --url. */
export function localOnly(ctx: Ctx, command: string): void {
  if (ctx.urlFlag)
    throw usage(`${command} works on the database (DATABASE_URL or the embedded one), not on a server: drop --url`);
}

export async function withBackend<T>(
  ctx: Ctx,
  workspace: string | undefined,
  fn: (b: Backend) => Promise<T>,
): Promise<T> {
  const b = await openBackend(ctx, workspace);
  try {
    return await fn(b);
  } finally {
    await b.close();
  }
}

/** The flags to repeat in a hint so it reaches the same runs (never the key itself). */
export function connectionHint(ctx: Ctx): string {
  return ctx.url ? `--url ${ctx.url}${process.env.TOOLCHAIN_API_KEY ? "" : " --key <key>"}` : "";
}

export function ioFor(ctx: Ctx, noInput: boolean): Io {
  const interactive = !ctx.json && !noInput && Boolean(process.stdin.isTTY) && Boolean(ctx.stdout.isTTY);
  return {
    out: ctx.out,
    progress: new Progress(ctx.stdout, progressMode(ctx.stdout, ctx.json), ctx.style),
    style: ctx.style,
    interactive,
    connection: connectionHint(ctx),
    json: ctx.json,
  };
}

/** Registers a command's action: the program supplies the context and records the exit code. */
export type Register = (
  cmd: Command,
  action: (ctx: Ctx, args: unknown[], opts: Record<string, unknown>) => Promise<number>,
) => Command;
