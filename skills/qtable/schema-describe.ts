/** qtable.table.schema.describe: a table's schema (fields and types), read in the caller's workspace. */
import { z } from "zod";
import { ErrorCode, ToolchainError } from "../../src/kernel/errors.js";
import { defineSkill } from "../../src/skills/contract.js";
import { TableIdSchema, TableSchemaOutput } from "./schemas.js";
import type { TableStore } from "./store.js";
import type { Table } from "./fields.js";

/** The workspace's table by id or name (the demo table is created lazily first). */
export async function tableFor(store: TableStore, workspaceId: string, tableId: string): Promise<Table> {
  await store.ensureWorkspace(workspaceId);
  const t = await store.getTable(workspaceId, tableId);
  if (!t)
    throw new ToolchainError(
      ErrorCode.TABLE_NOT_FOUND,
      `table ${JSON.stringify(tableId)} not found in workspace "${workspaceId}"`,
      { effectStarted: false },
    );
  return t;
}

export function schemaDescribeSkill(store: TableStore) {
  return defineSkill({
    name: "qtable.table.schema.describe",
    description:
      "Describe a table of the caller's workspace: { id, name, fields: [{ name, type, required?, options? }] }.",
    input: z.object({ tableId: TableIdSchema }).strict(),
    output: TableSchemaOutput,
    sideEffects: "read",
    idempotent: true,
    estimateDurationMs: () => 5,
    async execute(args, ctx) {
      return tableFor(store, ctx.workspaceId, args.tableId);
    },
  });
}
