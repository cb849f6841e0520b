/**
 * Crash points for the fault-injection suite (`npm run test:faults`). Compiled in always, inert
 * unless the process was started with:
 *
 * - `TOOLCHAIN_FAULT=point:n[,point:n…]`: SIGKILL this process at the n-th passage of `point`
 *   (a point ending in `*`: of any point it is a prefix of, counted together);
 * - `TOOLCHAIN_FAULT_RECORD=<file>`: append `point:n` for every passage (how the suite learns
 *   which kill points a clean run of a plan shape passes).
 *
 * The points are not placed by hand: every commit of the database layer passes one, named after
 * its SQL (src/store/commit-points.ts, installed on the pool only when this is active).
 */
import { appendFileSync } from "node:fs";

const kills = parse(process.env.TOOLCHAIN_FAULT);
const recordFile = process.env.TOOLCHAIN_FAULT_RECORD || undefined;
const active = kills.size > 0 || recordFile !== undefined;
const passages = new Map<string, number>();

function parse(spec: string | undefined): Map<string, Set<number>> {
  const m = new Map<string, Set<number>>();
  for (const part of (spec ?? "").split(",")) {
    const at = part.trim().lastIndexOf(":");
    const point = part.trim().slice(0, at);
    const n = part.trim().slice(at + 1);
    if (at <= 0 || !Number.isInteger(Number(n))) continue;
    if (!m.has(point)) m.set(point, new Set());
    m.get(point)!.add(Number(n));
  }
  return m;
}

/** Whether this process records or kills at crash points. */
export const faultsActive = (): boolean => active;

/** A passage of a named crash point. */
export function passPoint(point: string): void {
  if (!active) return;
  const n = (passages.get(point) ?? 0) + 1;
  passages.set(point, n);
  if (recordFile) appendFileSync(recordFile, `${point}:${n}\n`);
  let kill = kills.get(point)?.has(n) ?? false;
  for (const [pattern, ns] of kills)
    if (pattern.endsWith("*") && point.startsWith(pattern.slice(0, -1))) {
      const k = (passages.get(pattern) ?? 0) + 1;
      passages.set(pattern, k);
      kill ||= ns.has(k);
    }
  if (kill) {
    process.kill(process.pid, "SIGKILL");
    // SIGKILL to oneself is delivered before kill(2) returns; never run another line regardless
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  }
}
