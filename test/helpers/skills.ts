/** Test skills: effect counters, gates and probes used across kernel tests. */
import { z } from "zod";
import { defineSkill, type Skill } from "../../src/skills/contract.js";
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { abortableSleep } from "../../skills/core/index.js";
import { waitFor } from "./wait.js";

/** Counts side effects per idempotency key; compensations likewise. */
export class EffectLedger {
  readonly effects = new Map<string, number>();
  readonly compensations = new Map<string, number>();
  readonly reconciles = new Map<string, number>();
  readonly log: string[] = [];
  total(): number {
    return [...this.effects.values()].reduce((a, b) => a + b, 0);
  }
}

/**
 * A non-idempotent write (like "send an email"). `failAfterEffect` makes it fail once the
 * effect happened; `failBeforeEffect` makes it refuse before anything went out.
 */
export function effectSkill(
  ledger: EffectLedger,
  opts: { name?: string; idempotent?: boolean; compensable?: boolean; compensationFailures?: number } = {},
): Skill {
  let compFails = opts.compensationFailures ?? 0;
  return defineSkill({
    name: opts.name ?? "test.effect",
    description: "records an effect",
    input: z.object({
      label: z.string(),
      failAfterEffect: z.boolean().optional(),
      failBeforeEffect: z.boolean().optional(),
      ms: z.number().optional(),
    }),
    sideEffects: "write",
    idempotent: opts.idempotent ?? false,
    async execute(args, ctx) {
      if (args.failBeforeEffect && ctx.attempt === 1) {
        throw new ToolchainError(ErrorCode.RATE_LIMITED, "provider refused", { effectStarted: false });
      }
      ledger.effects.set(ctx.idempotencyKey, (ledger.effects.get(ctx.idempotencyKey) ?? 0) + 1);
      ledger.log.push(`effect:${args.label}`);
      if (args.ms) await abortableSleep(args.ms, ctx.signal);
      if (args.failAfterEffect) throw new ToolchainError(ErrorCode.EXECUTION_FAILED, "failed after the effect");
      return { label: args.label };
    },
    ...(opts.compensable === false
      ? {}
      : {
          async compensate(c: { idempotencyKey: string; output: unknown }) {
            if (compFails > 0) {
              compFails--;
              throw new ToolchainError(ErrorCode.TRANSIENT, "compensation failed");
            }
            ledger.compensations.set(c.idempotencyKey, (ledger.compensations.get(c.idempotencyKey) ?? 0) + 1);
            ledger.log.push(`undo:${(c.output as { label: string }).label}`);
          },
        }),
  });
}

/** Tracks how many steps run at once, overall and per key. */
export class ConcurrencyProbe {
  running = 0;
  maxRunning = 0;
  readonly perKey = new Map<string, number>();
  readonly maxPerKey = new Map<string, number>();
  enter(key: string): void {
    this.running++;
    this.maxRunning = Math.max(this.maxRunning, this.running);
    const n = (this.perKey.get(key) ?? 0) + 1;
    this.perKey.set(key, n);
    this.maxPerKey.set(key, Math.max(this.maxPerKey.get(key) ?? 0, n));
  }
  exit(key: string): void {
    this.running--;
    this.perKey.set(key, this.perKey.get(key)! - 1);
  }
}

export function probeSkill(
  probe: ConcurrencyProbe,
  opts: { name: string; serialByKey?: boolean; resource?: { name: string; limit: number } },
): Skill {
  return defineSkill({
    name: opts.name,
    description: "waits while recording concurrency",
    input: z.object({ key: z.string(), ms: z.number() }),
    sideEffects: "none",
    idempotent: true,
    ...(opts.serialByKey ? { serialKey: (a: { key: string }) => a.key } : {}),
    ...(opts.resource ? { resource: opts.resource } : {}),
    async execute(args, ctx) {
      probe.enter(args.key);
      try {
        await abortableSleep(args.ms, ctx.signal);
      } finally {
        probe.exit(args.key);
      }
      return args.key;
    },
  });
}

/** Steps that block until the test opens their gate. */
export class Gates {
  private readonly gates = new Map<string, { p: Promise<void>; open: () => void }>();
  readonly entered = new Set<string>();
  private get(name: string) {
    let g = this.gates.get(name);
    if (!g) {
      let open!: () => void;
      const p = new Promise<void>((r) => (open = r));
      this.gates.set(name, (g = { p, open }));
    }
    return g;
  }
  open(name: string): void {
    this.get(name).open();
  }
  wait(name: string): Promise<void> {
    this.entered.add(name);
    return this.get(name).p;
  }
  async untilEntered(name: string, timeoutMs = 5_000): Promise<void> {
    await waitFor(() => this.entered.has(name), { timeoutMs, intervalMs: 2, what: `gate ${name} entered` });
  }
}

export function gateSkill(gates: Gates, calls: Map<string, number>): Skill {
  return defineSkill({
    name: "test.gate",
    description: "blocks until the test opens the gate named by `gate`",
    input: z.object({ gate: z.string(), value: z.unknown().optional() }),
    sideEffects: "none",
    idempotent: true,
    async execute(args) {
      calls.set(args.gate, (calls.get(args.gate) ?? 0) + 1);
      await gates.wait(args.gate);
      return args.value ?? args.gate;
    },
  });
}

/** A confirmation-requiring write with a preview; counts executions. */
export function approvalSkill(ledger: EffectLedger): Skill {
  return defineSkill({
    name: "test.publish",
    description: "publishes `title` after human approval",
    input: z.object({ title: z.string().min(1) }),
    sideEffects: "external",
    idempotent: false,
    requiresConfirmation: true,
    preview: (a: { title: string }) => ({ willPublish: a.title }),
    async execute(args, ctx) {
      ledger.effects.set(ctx.idempotencyKey, (ledger.effects.get(ctx.idempotencyKey) ?? 0) + 1);
      ledger.log.push(`publish:${args.title}`);
      return { published: args.title };
    },
    async compensate(c: { idempotencyKey: string; output: unknown }) {
      ledger.compensations.set(c.idempotencyKey, (ledger.compensations.get(c.idempotencyKey) ?? 0) + 1);
      ledger.log.push(`unpublish:${(c.output as { published: string }).published}`);
    },
  });
}

/** A record store in memory and a skill that creates records in it (delete_created_records). */
export class RecordTable {
  readonly rows = new Map<string, { id: string; title: string; createdBy: string }>();
  private next = 1;
  insert(title: string, createdBy: string): string {
    const id = `rec_${this.next++}`;
    this.rows.set(id, { id, title, createdBy });
    return id;
  }
}

export function createRecordsSkill(table: RecordTable): Skill {
  return defineSkill({
    name: "test.create_records",
    description: "creates one record per title",
    input: z.object({ titles: z.array(z.string()) }),
    output: z.object({ ids: z.array(z.string()) }),
    sideEffects: "write",
    idempotent: false,
    async execute(args, ctx) {
      return { ids: args.titles.map((t) => table.insert(t, ctx.stepId)) };
    },
    createdRecords: {
      list: (output: { ids: string[] }) => output.ids.map((id) => ({ resource: "records", id })),
      async delete(records: { id: string }[]) {
        for (const r of records) table.rows.delete(r.id);
      },
    },
  });
}
