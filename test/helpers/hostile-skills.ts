/** Skills that misbehave in the ways issue 8 (items 3, 11) and issue 16 (item 1) describe. */
import { z } from "zod";
import { abortableSleep } from "../../skills/core/index.js";
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { defineSkill, type Skill } from "../../src/skills/contract.js";

/** Values a skill may hand back that Postgres jsonb/text cannot hold (or JSON cannot express). */
export const HOSTILE_OUTPUTS: Record<string, () => unknown> = {
  nul: () => ({ s: "a\u0000b" }),
  nulKey: () => ({ ["k\u0000"]: 1 }),
  loneSurrogate: () => ({ s: "x\ud800y" }),
  bigint: () => ({ n: 10n ** 30n }),
  nan: () => ({ n: Number.NaN }),
  deep: () => {
    let v: unknown = "leaf";
    for (let i = 0; i < 200; i++) v = { v };
    return v;
  },
  circular: () => {
    const o: Record<string, unknown> = {};
    o.self = o;
    return o;
  },
};

/** Returns `HOSTILE_OUTPUTS[kind]()`, or the given `value`; `failWith` throws that text with a NUL appended (and in details). */
export function hostileSkill(calls: { n: number } = { n: 0 }): Skill {
  return defineSkill({
    name: "test.hostile",
    description: "returns or throws values the run history cannot store",
    input: z.object({ kind: z.string().optional(), value: z.unknown().optional(), failWith: z.string().optional() }),
    sideEffects: "none",
    idempotent: true,
    async execute(a) {
      calls.n++;
      if (a.failWith !== undefined)
        throw new ToolchainError(ErrorCode.INVALID_INPUT, `${a.failWith}\u0000text`, {
          details: { echo: a.failWith, bad: "\u0000" },
        });
      return a.kind ? HOSTILE_OUTPUTS[a.kind]!() : a.value;
    },
  });
}

/** A step needing confirmation whose preview cannot be stored. */
export function hostilePreviewSkill(): Skill {
  return defineSkill({
    name: "test.hostile_preview",
    description: "its preview holds a NUL",
    input: z.object({ title: z.string() }),
    sideEffects: "none",
    idempotent: true,
    requiresConfirmation: true,
    preview: (a: { title: string }) => ({ title: `${a.title}\u0000` }),
    async execute(a) {
      return a;
    },
  });
}

/**
 * A poison skill: its serialKey hook throws, so every drive of a run using it throws inside the
 * scheduler (a bug in skill code the runtime calls outside an attempt). Counts the calls.
 */
export function poisonSkill(calls: { n: number } = { n: 0 }): Skill {
  return defineSkill({
    name: "test.poison",
    description: "its serialKey hook throws",
    input: z.object({ n: z.number().optional() }),
    sideEffects: "none",
    idempotent: true,
    serialKey: () => {
      calls.n++;
      throw new Error("serialKey exploded");
    },
    async execute() {
      return "never";
    },
  });
}

/** A write whose compensation hangs: ignoring its signal (`ignore`) or honouring it. */
export function hangingUndoSkill(undos: { started: number; finished: number }): Skill {
  return defineSkill({
    name: "test.hanging_undo",
    description: "a write whose compensation takes forever",
    input: z.object({ label: z.string(), honourSignal: z.boolean().optional() }),
    sideEffects: "write",
    idempotent: true,
    async execute(a) {
      return { label: a.label };
    },
    async compensate(c: { input: unknown; signal: AbortSignal }) {
      undos.started++;
      const honour = (c.input as { honourSignal?: boolean }).honourSignal;
      if (honour) await abortableSleep(3_600_000, c.signal);
      else await new Promise(() => undefined);
      undos.finished++;
    },
  });
}
