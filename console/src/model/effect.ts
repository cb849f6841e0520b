/**
 * What a confirmation will do, in a few words an approver reads first: the action, its target
 * (a table by name and id, a channel), how many records, and whether it can be undone. Read from
 * the skill's manifest (side effects, compensable) and the preview's conventional fields
 * (`action`, `table: { id, name }` or `tableId`, `count` or `records`, `channel`). Pure.
 */
import { recordTables } from "./records.js";
import type { SkillInfo } from "./types.js";

export type Reversibility = "reversible" | "external" | "irreversible" | "no_effect" | "unknown";

export interface EffectSummary {
  /** "write records", "send message", or the skill's name. */
  action: string;
  target: { label: string; id?: string; name?: string } | null;
  count: number | null;
  channel: string | null;
  reversibility: Reversibility;
  /** One sentence for the heading of the summary. */
  sentence: string;
}

const obj = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
const str = (v: unknown) => (typeof v === "string" && v.trim() ? v : undefined);

export const REVERSIBILITY_TEXT: Record<Reversibility, string> = {
  reversible: "Reversible: undone by compensation if the run rolls back",
  external: "External and not undoable: it leaves this system",
  irreversible: "Irreversible: no compensation exists",
  no_effect: "No side effect",
  unknown: "Effect unknown",
};

export function reversibilityOf(skill: SkillInfo | undefined): Reversibility {
  if (!skill) return "unknown";
  if (skill.sideEffects === "none" || skill.sideEffects === "read") return "no_effect";
  if (skill.compensable) return "reversible";
  return skill.sideEffects === "external" ? "external" : "irreversible";
}

export function effectSummary(
  skillName: string,
  skill: SkillInfo | undefined,
  preview: unknown,
  args: unknown,
): EffectSummary {
  const p = obj(preview) ?? {};
  const a = obj(args) ?? {};
  const action = (str(p.action) ?? skillName).replace(/_/g, " ");
  const table = obj(p.table);
  const tableId = str(table?.id) ?? str(p.tableId) ?? str(a.tableId);
  const tableName = str(table?.name);
  const target =
    tableId || tableName
      ? { label: "table", ...(tableId ? { id: tableId } : {}), ...(tableName ? { name: tableName } : {}) }
      : null;
  const tables = recordTables(preview);
  const count =
    typeof p.count === "number"
      ? p.count
      : Array.isArray(p.records)
        ? p.records.length
        : tables.length
          ? tables[0]!.rows.length
          : null;
  const channel = str(p.channel) ?? str(a.channel) ?? null;
  const reversibility = reversibilityOf(skill);
  const where = target
    ? ` into ${target.name ? `“${target.name}”` : "table"}${target.id ? ` (${target.id})` : ""}`
    : "";
  const what = count !== null ? `${action}: ${count} record${count === 1 ? "" : "s"}${where}` : `${action}${where}`;
  const sentence = `${what}${channel ? ` on ${channel}` : ""}.`;
  return { action, target, count, channel, reversibility, sentence };
}
