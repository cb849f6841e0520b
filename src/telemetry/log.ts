/**
 * The process's one logger (pino). JSON lines by default when stderr is not a terminal; on a
 * terminal, one readable line per entry. Every line written while a span is active carries its
 * `traceId` and `spanId`; run lines carry `runId`, `stepId`, `workspace`.
 *
 * TOOLCHAIN_LOG_LEVEL: trace | debug | info | warn | error | fatal | silent (@default info)
 * TOOLCHAIN_LOG_FORMAT: json | pretty (@default pretty on a TTY, json otherwise)
 */
import { pino, type Logger } from "pino";
import { Writable } from "node:stream";
import type { SkillLogger } from "../skills/contract.js";
import { context, trace } from "./tracing.js";

const LEVELS = ["trace", "debug", "info", "warn", "error", "fatal", "silent"] as const;
const NAMES: Record<number, string> = { 10: "TRACE", 20: "DEBUG", 30: "INFO", 40: "WARN", 50: "ERROR", 60: "FATAL" };

/** One readable line from a pino JSON line (pure). */
export function prettyLine(json: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json);
  } catch {
    return json;
  }
  const { level, time, msg, pid: _p, hostname: _h, ...rest } = o;
  const t = typeof time === "number" ? new Date(time).toISOString().slice(11, 23) : "";
  const kv = Object.entries(rest)
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(" ");
  return `${t} ${NAMES[Number(level)] ?? level} ${String(msg ?? "")}${kv ? `  ${kv}` : ""}\n`;
}

export function createLogger(
  env: NodeJS.ProcessEnv = process.env,
  out: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr,
): Logger {
  const raw = env.TOOLCHAIN_LOG_LEVEL?.trim().toLowerCase() || "info";
  if (!(LEVELS as readonly string[]).includes(raw))
    throw new Error(`TOOLCHAIN_LOG_LEVEL: "${raw}" is not a level (${LEVELS.join(", ")})`);
  const format = env.TOOLCHAIN_LOG_FORMAT?.trim().toLowerCase() || (out.isTTY ? "pretty" : "json");
  if (format !== "json" && format !== "pretty")
    throw new Error(`TOOLCHAIN_LOG_FORMAT: "${format}" is not a format (json, pretty)`);
  const dest =
    format === "json"
      ? out
      : new Writable({
          write(chunk, _enc, cb) {
            out.write(prettyLine(String(chunk)));
            cb();
          },
        });
  return pino(
    {
      level: raw,
      base: undefined,
      // correlation with the trace: the active span (a drive's, a skill's execute_tool)
      mixin() {
        const sc = trace.getSpanContext(context.active());
        return sc && trace.isSpanContextValid(sc) ? { traceId: sc.traceId, spanId: sc.spanId } : {};
      },
    },
    dest as NodeJS.WritableStream as never,
  );
}

let root: Logger | undefined;
/** The process's logger (created on first use from the environment). */
export function logger(): Logger {
  return (root ??= createLogger());
}

/** A run's logger (what skills get as `ctx.logger`): every line names the run, step and workspace. */
export function runLogger(runId: string, stepId?: string, workspace?: string): SkillLogger {
  // created on first use: most attempts never log, and the attempt path stays as cheap as before
  let l: Logger | undefined;
  const get = () =>
    (l ??= logger().child({ runId, ...(stepId ? { stepId } : {}), ...(workspace ? { workspace } : {}) }));
  return {
    debug: (msg, data) => get().debug(data ?? {}, msg),
    info: (msg, data) => get().info(data ?? {}, msg),
    warn: (msg, data) => get().warn(data ?? {}, msg),
    error: (msg, data) => get().error(data ?? {}, msg),
  };
}
