/**
 * Exit codes and errors of the `toolchain` command, one vocabulary for every command, local or
 * remote: scripts branch on the code, people read the message.
 */
import { readFileSync } from "node:fs";
import type { RunStatus } from "../kernel/status.js";

export const Exit = {
  /** the command did what it was asked; a run ended `completed` */
  ok: 0,
  /** a run ended otherwise (failed, cancelled, rolled back, a rejected step); `keys revoke` found no key */
  failed: 1,
  /** a usage error, or a coded error (`CODE: message` on stderr: PLAN_CYCLE, RUN_NOT_FOUND, UNAUTHORIZED, …) */
  usage: 2,
  /** the run waits for a confirmation (nothing was decided; `toolchain approve|reject` later) */
  waiting: 3,
} as const;
export type ExitCode = (typeof Exit)[keyof typeof Exit];

/** A coded error raised by the CLI itself or answered by the API (`{ error: { code, message } }`). */
export class CliError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = "CliError";
  }
}

export const usage = (message: string) => new CliError("USAGE", message);

/** What a run's status means to a script. */
export function exitForStatus(status: RunStatus): ExitCode {
  if (status === "completed") return Exit.ok;
  if (status === "waiting_confirmation") return Exit.waiting;
  return Exit.failed;
}

/**
 * A JSON option value: inline JSON (`'{"a":1}'`), `@file.json`, or a path to a JSON file
 * (`--arguments edited.json`), so the same flag reads well in a shell and in a script.
 */
export function jsonArg(value: string | undefined, what: string): unknown {
  if (value === undefined) return undefined;
  const v = value.trim();
  const fromFile = v.startsWith("@") ? v.slice(1) : /^[[{"]|^(true|false|null|-?\d)/.test(v) ? undefined : v;
  let text = v;
  if (fromFile !== undefined) {
    try {
      text = readFileSync(fromFile, "utf8");
    } catch (e) {
      throw usage(`${what}: cannot read ${fromFile} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw usage(`${what}: not valid JSON${fromFile !== undefined ? ` in ${fromFile}` : ""} (${(e as Error).message})`);
  }
}

export function jsonObjectArg(value: string | undefined, what: string): Record<string, unknown> | undefined {
  const v = jsonArg(value, what);
  if (v === undefined) return undefined;
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw usage(`${what}: expected a JSON object`);
  return v as Record<string, unknown>;
}

/** How an error reaches the user: `CODE: message`, and its exit code. */
export function describeError(e: unknown): { code: string; message: string; exit: ExitCode } {
  const err = e as { code?: unknown; message?: string } | null;
  if (err && typeof err.code === "string" && /^[A-Z][A-Z_]+$/.test(err.code))
    return { code: err.code, message: err.message ?? String(e), exit: Exit.usage };
  return { code: "INTERNAL", message: err?.message ?? String(e), exit: Exit.failed };
}
