/**
 * The difference between two JSON values as a list of changed paths (what an approver's edit
 * changed in the arguments, or in the preview it produces). Arrays compare by index. Pure.
 */
import { jsonEqual } from "./format.js";

export interface Change {
  /** "/records/0/title"; "" for the value itself. */
  path: string;
  kind: "added" | "removed" | "changed";
  before?: unknown;
  after?: unknown;
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const esc = (k: string) => k.replace(/~/g, "~0").replace(/\//g, "~1");

export function diffJson(before: unknown, after: unknown, path = "", out: Change[] = [], max = 200): Change[] {
  if (out.length >= max || jsonEqual(before, after)) return out;
  if (Array.isArray(before) && Array.isArray(after)) {
    for (let i = 0; i < Math.max(before.length, after.length); i++) {
      const p = `${path}/${i}`;
      if (i >= before.length) out.push({ path: p, kind: "added", after: after[i] });
      else if (i >= after.length) out.push({ path: p, kind: "removed", before: before[i] });
      else diffJson(before[i], after[i], p, out, max);
    }
    return out;
  }
  if (isObj(before) && isObj(after)) {
    for (const k of new Set([...Object.keys(before), ...Object.keys(after)])) {
      const p = `${path}/${esc(k)}`;
      if (!Object.hasOwn(after, k)) out.push({ path: p, kind: "removed", before: before[k] });
      else if (!Object.hasOwn(before, k)) out.push({ path: p, kind: "added", after: after[k] });
      else diffJson(before[k], after[k], p, out, max);
    }
    return out;
  }
  out.push({ path, kind: "changed", before, after });
  return out;
}
