/**
 * Skills for the decision model (test/decisions.model.test.ts): every effect and compensation is
 * counted per idempotency key in an EffectLedger, so the oracle can say "exactly once".
 */
import { z } from "zod";
import { defineSkill, type Skill } from "../../src/skills/contract.js";
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { abortableSleep } from "../../skills/core/index.js";
import type { EffectLedger } from "./skills.js";

const bump = (m: Map<string, number>, k: string) => m.set(k, (m.get(k) ?? 0) + 1);

/**
 * A compensable non-idempotent write. `failFirst`: attempt 1 refuses before any effect (a retry
 * succeeds). `hang`: the first execution per key hangs after its effect until aborted (the
 * process "dies" there). `undoFailures`: the first n compensations per key fail. `reconcile`:
 * "ledger" answers from the ledger (applied iff the effect was counted), "denies" always says not
 * applied; without it the skill cannot tell.
 */
export function modelSkill(
  ledger: EffectLedger,
  opts: {
    name: string;
    requiresConfirmation?: boolean;
    undoFailures?: number;
    hangs?: HangSwitch;
    reconcile?: "ledger" | "denies";
  },
): Skill {
  const undoFailed = new Map<string, number>();
  const hung = new Set<string>();
  return defineSkill({
    name: opts.name,
    description: "records an effect (model test)",
    input: z.object({ label: z.string(), failFirst: z.boolean().optional(), hang: z.boolean().optional() }),
    sideEffects: "write",
    idempotent: false,
    ...(opts.requiresConfirmation
      ? { requiresConfirmation: true, preview: (a: { label: string }) => ({ will: a.label }) }
      : {}),
    async execute(args, ctx) {
      if (args.failFirst && ctx.attempt === 1)
        throw new ToolchainError(ErrorCode.RATE_LIMITED, "provider refused", { effectStarted: false });
      bump(ledger.effects, ctx.idempotencyKey);
      if (args.hang && !hung.has(ctx.idempotencyKey)) {
        hung.add(ctx.idempotencyKey);
        // a hung step ends with its drive, or when the test lets a "dead" process's steps go
        await abortableSleep(600_000, opts.hangs ? AbortSignal.any([ctx.signal, opts.hangs.signal]) : ctx.signal).catch(
          () => undefined,
        );
      }
      return { label: args.label };
    },
    ...(opts.reconcile
      ? {
          async reconcile(c: { idempotencyKey: string; input: { label: string } }) {
            bump(ledger.reconciles, c.idempotencyKey);
            return opts.reconcile === "ledger" && (ledger.effects.get(c.idempotencyKey) ?? 0) > 0
              ? { applied: true as const, output: { label: c.input.label } }
              : { applied: false as const };
          },
        }
      : {}),
    async compensate(c: { idempotencyKey: string; output: unknown }) {
      const n = undoFailed.get(c.idempotencyKey) ?? 0;
      if (n < (opts.undoFailures ?? 0)) {
        undoFailed.set(c.idempotencyKey, n + 1);
        throw new ToolchainError(ErrorCode.TRANSIENT, "compensation failed");
      }
      bump(ledger.compensations, c.idempotencyKey);
    },
  });
}

/** Releases every hung step (a crashed process's steps must not outlive the test). */
export class HangSwitch {
  private ac = new AbortController();
  get signal(): AbortSignal {
    return this.ac.signal;
  }
  releaseAll(): void {
    this.ac.abort();
    this.ac = new AbortController();
  }
}

export const modelSkills = (ledger: EffectLedger, hangs?: HangSwitch): Skill[] => [
  modelSkill(ledger, { name: "m.write", ...(hangs ? { hangs } : {}) }),
  modelSkill(ledger, { name: "m.checked", reconcile: "ledger", ...(hangs ? { hangs } : {}) }),
  modelSkill(ledger, { name: "m.denies", reconcile: "denies", ...(hangs ? { hangs } : {}) }),
  modelSkill(ledger, { name: "m.asks", requiresConfirmation: true }),
  // fails every compensation of its first round (two attempts), then succeeds
  modelSkill(ledger, { name: "m.brittle", undoFailures: 2 }),
];
