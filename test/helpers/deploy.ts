/**
 * A deploy while a step waits: two versions of one confirming skill (2.0.0 renames `label` to
 * `name` with a migration and previews a channel too), and runs started under the first that
 * wait for their confirmation, in a store and checkpointer the next deploy's runtime shares.
 */
import { MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import { createRuntime } from "../../src/runtime/runtime.js";
import { defineSkill } from "../../src/skills/contract.js";
import { MemoryRunStore } from "../../src/store/memory-run-store.js";
import type { ToolChainPlanInput } from "../../src/plan/schema.js";

const common = {
  name: "t.notify",
  description: "sends a notice; asks first",
  sideEffects: "external" as const,
  idempotent: true,
  requiresConfirmation: true,
};
export const notifyV1 = defineSkill({
  ...common,
  input: z.object({ label: z.string() }),
  preview: (a) => ({ message: `notify ${a.label}` }),
  execute: async (a) => ({ sent: a.label, v: 1 }),
});
export const notifyV2 = defineSkill({
  ...common,
  version: "2.0.0",
  compatibleWith: ["1.0.0"],
  migrate: (a, from) => (from === "1.0.0" ? { name: String(a.label) } : a),
  input: z.object({ name: z.string().min(1, "a name is required") }),
  preview: (a) => ({ message: `notify ${a.name}`, channel: "email" }),
  execute: async (a) => ({ sent: a.name, v: 2 }),
});

/** Start each plan under the first deploy; each must end waiting. The shared persistence and run ids. */
export async function waitingUnderV1(plans: ToolChainPlanInput[], workspaceId: string) {
  const checkpointer = new MemorySaver();
  const store = new MemoryRunStore();
  const before = createRuntime({ skills: [notifyV1], checkpointer, store });
  const runIds: string[] = [];
  for (const plan of plans) {
    const view = await before.run(plan, { workspaceId }).result;
    if (view.status !== "waiting_confirmation") throw new Error(`expected the run to wait, got ${view.status}`);
    runIds.push(view.runId);
  }
  return { checkpointer, store, runIds };
}
