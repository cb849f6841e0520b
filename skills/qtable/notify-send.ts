/**
 * qtable.notify.send: post a message to a channel. External and irreversible (the outbox table
 * stands for the provider: once a message is in it, it counts as delivered). No compensation, so a
 * strict-rollback plan must say `acceptNoCompensation` on the step.
 */
import { z } from "zod";
import { defineSkill } from "../../src/skills/contract.js";
import type { OutboxMessage, TableStore } from "./store.js";

const toOutput = (m: OutboxMessage) => ({ messageId: m.id, channel: m.channel, sentAt: m.createdAt });

export function notifySendSkill(store: TableStore) {
  return defineSkill({
    name: "qtable.notify.send",
    description:
      "Send a message to a channel (e.g. #approvals). External and irreversible: requires confirmation and cannot be compensated.",
    input: z
      .object({
        channel: z
          .string()
          .trim()
          .min(1)
          .max(100)
          .regex(/^[^\u0000]*$/, "no NUL characters"),
        message: z
          .string()
          .min(1)
          .max(10_000)
          .regex(/^[^\u0000]*$/, "no NUL characters"),
      })
      .strict(),
    output: z.object({ messageId: z.string(), channel: z.string(), sentAt: z.string() }),
    sideEffects: "external",
    // a provider call is not assumed repeatable: the runtime writes an intent first and asks
    // reconcile after a crash (the provider is given the idempotency key, as real ones are)
    idempotent: false,
    requiresConfirmation: true,
    preview: (a) => ({ action: "send_message", channel: a.channel, message: a.message }),
    estimateDurationMs: () => 20,
    async execute(args, ctx) {
      const { message } = await store.sendMessage(ctx.workspaceId, args.channel, args.message, ctx.idempotencyKey);
      return toOutput(message);
    },
    async reconcile(c) {
      const m = await store.findMessage(c.workspaceId, c.idempotencyKey);
      return m ? { applied: true, output: toOutput(m) } : { applied: false };
    },
  });
}
