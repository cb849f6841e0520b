/**
 * `toolchain`: the command line, as a function (src/cli/main.ts runs it on process.argv; an
 * embedding program runs it with its own skills: `runCli(argv, { onRuntime })`).
 * Commands are declared with commander in run-commands.ts (run, approve, reject, confirm, cancel,
 * runs, show) and admin-commands.ts (serve, worker, mcp, keys, prune, validate, skills, plan, demo).
 * Global flags: `--url`/`--key` (a server instead of the database), `--json`.
 * Exit codes: exit.ts (0 completed, 1 other end, 2 usage or coded error, 3 waiting).
 * Storage: DATABASE_URL (server Postgres) or embedded Postgres in TOOLCHAIN_DATA_DIR (./.data/pglite).
 */
import { Command, CommanderError } from "commander";
import { registerAdminCommands } from "./admin-commands.js";
import { makeCtx, type Ctx, type GlobalFlags } from "./context.js";
import { esc } from "./escape.js";
import { describeError, Exit } from "./exit.js";
import { registerRunCommands, type Register } from "./run-commands.js";
import { setupTelemetry, shutdownTelemetry } from "../telemetry/setup.js";
import type { OpenedRuntime } from "../runtime/open.js";

export interface CliOptions {
  /** Called with each runtime a command opens on the database, before it is used: register skills here. */
  onRuntime?: (opened: OpenedRuntime) => Promise<void> | void;
}

function buildProgram(result: { code: number }, cli: CliOptions): Command {
  const program = new Command("toolchain")
    .description("Run AI-agent tool chains: plans of skills with live progress, confirmations, compensation.")
    .option("--url <url>", "act on a running server instead of the database (env TOOLCHAIN_URL)")
    .option("--key <key>", "the server's API key (env TOOLCHAIN_API_KEY)")
    .option("--json", "print one machine-readable JSON document")
    .showHelpAfterError("(toolchain --help lists the commands; toolchain <command> --help their flags)")
    .configureHelp({ showGlobalOptions: true, sortSubcommands: false })
    .addHelpText(
      "after",
      `
Exit codes: 0 completed (or done), 1 the run ended otherwise (failed, cancelled, rejected, rolled back),
            2 usage error or coded error (CODE: message on stderr), 3 the run waits for a confirmation.
Storage:    DATABASE_URL (Postgres server), else embedded Postgres in TOOLCHAIN_DATA_DIR (.data/pglite;
            TOOLCHAIN_EMBEDDED_ENGINE=postgres: a postgres child process in .data/postgres).
            With --url/--key the run commands use a server's API (works while \`npm start\` runs).`,
    )
    .exitOverride();
  const register: Register = (cmd, action) =>
    cmd.action(async (...all: unknown[]) => {
      // commander passes (...arguments, options, command)
      const self = all[all.length - 1] as Command;
      const opts = all[all.length - 2] as Record<string, unknown>;
      const ctx: Ctx = makeCtx(self.optsWithGlobals() as GlobalFlags, process.stdout, cli.onRuntime);
      result.code = await action(ctx, all.slice(0, -2), opts);
    });
  registerRunCommands(program, register);
  registerAdminCommands(program, register);
  // every subcommand exits through us (codes 0/2), not through process.exit inside commander
  for (const c of program.commands) {
    c.exitOverride();
    for (const s of c.commands) s.exitOverride();
  }
  return program;
}

async function main(argv: string[], cli: CliOptions): Promise<number> {
  const result = { code: Exit.ok as number };
  const program = buildProgram(result, cli);
  // an unknown first word is an unknown command (commander would hand it to the default command, the demo)
  const first = argv.find((a, i) => !a.startsWith("-") && !(i > 0 && ["--url", "--key"].includes(argv[i - 1]!)));
  const names = program.commands.flatMap((c) => [c.name(), ...c.aliases()]);
  if (first !== undefined && !names.includes(first) && first !== "help") {
    console.error(`unknown command "${first}". Commands: ${names.join(", ")} (toolchain --help)`);
    return Exit.usage;
  }
  const json = argv.includes("--json");
  try {
    await program.parseAsync(argv, { from: "user" });
    return result.code;
  } catch (e) {
    if (e instanceof CommanderError) {
      // --help is an answer; help shown for a missing subcommand (`toolchain keys`) and every other
      // commander error (its message is printed) is a usage error
      if (e.code === "commander.helpDisplayed" || e.code === "commander.version") return Exit.ok;
      if (e.code === "commander.help" && argv.some((a) => a === "help" || a === "--help" || a === "-h")) return Exit.ok;
      return Exit.usage;
    }
    const d = describeError(e);
    if (json) process.stdout.write(`${JSON.stringify({ error: { code: d.code, message: d.message } }, null, 2)}\n`);
    // an error message may quote run data (a server's answer, a step's error): never terminal control
    console.error(
      d.code === "USAGE"
        ? `usage: ${esc(d.message)}`
        : d.code === "INTERNAL"
          ? process.env.TOOLCHAIN_DEBUG
            ? e
            : `error: ${esc(d.message)}`
          : `${esc(String(d.code))}: ${esc(d.message)}`,
    );
    return d.exit;
  }
}

/** Traces from OTEL_* (src/telemetry/setup.ts): started before any command, flushed before the process exits. */
export async function runCli(argv: string[], cli: CliOptions = {}): Promise<number> {
  try {
    await setupTelemetry();
  } catch (e) {
    console.error(`usage: ${esc((e as Error).message)}`);
    return Exit.usage;
  }
  try {
    return await main(argv, cli);
  } finally {
    await shutdownTelemetry();
  }
}
