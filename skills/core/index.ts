/**
 * Built-in skills for composing and testing chains, like Step Functions' Pass/Wait/Fail states.
 */
import { z } from "zod";
import { defineSkill, type Skill } from "../../src/skills/contract.js";
import { ERROR_CODES, ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { abortableSleep } from "../../src/kernel/sleep.js";

export const corePass = defineSkill({
  name: "core.pass",
  description: "Returns its `value` unchanged. Useful to shape data or inject constants into a chain.",
  input: z.object({ value: z.unknown() }).strict(),
  output: z.unknown(),
  sideEffects: "none",
  idempotent: true,
  estimateDurationMs: () => 0,
  async execute(args) {
    return args.value;
  },
});

export const coreWait = defineSkill({
  name: "core.wait",
  description: "Waits `ms` milliseconds (abortable), then returns `value`.",
  input: z.object({ ms: z.number().int().min(0).max(86_400_000), value: z.unknown().optional() }).strict(),
  output: z.unknown(),
  sideEffects: "none",
  idempotent: true,
  estimateDurationMs: (a) => a.ms,
  async execute(args, ctx) {
    await abortableSleep(args.ms, ctx.signal);
    return args.value ?? null;
  },
});

export const coreFail = defineSkill({
  name: "core.fail",
  description:
    "Fails with the given error code. With `untilAttempt: n` it fails on attempts before n and returns `value` from attempt n on.",
  input: z
    .object({
      code: z.enum(ERROR_CODES).default("EXECUTION_FAILED"),
      message: z.string().default("core.fail"),
      untilAttempt: z.number().int().min(1).optional(),
      value: z.unknown().optional(),
    })
    .strict(),
  output: z.unknown(),
  sideEffects: "none",
  idempotent: true,
  estimateDurationMs: () => 0,
  async execute(args, ctx) {
    if (args.untilAttempt !== undefined && ctx.attempt >= args.untilAttempt) return args.value ?? null;
    throw new ToolchainError(args.code, args.message, { effectStarted: false });
  },
});

export const coreSkills: Skill[] = [corePass, coreWait, coreFail];

export { abortableSleep } from "../../src/kernel/sleep.js";
