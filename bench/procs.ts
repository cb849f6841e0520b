/**
 * Processes of this machine for the scale-out benches: CPU seconds from /proc and CPU pinning with
 * `taskset` (util-linux), so a measurement can keep its load generator off the cores it measures.
 */
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

const CLK_TCK = 100; // Linux USER_HZ: /proc/<pid>/stat times are in 1/100 s

/** A process's CPU seconds so far (user + system), 0 once it is gone. */
export function cpuSecondsOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" "); // f[0] is field 3 (state): utime is 14, stime 15
    return (Number(f[11]) + Number(f[12])) / CLK_TCK;
  } catch {
    return 0;
  }
}

/** Every postgres process of this machine (postmaster, backends, WAL writer, checkpointer...). */
export function postgresPids(): number[] {
  const out: number[] = [];
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      if (stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")")) === "postgres") out.push(Number(pid));
    } catch {
      // ended between readdir and read
    }
  }
  return out;
}

/** A process and every descendant (postgres is node → sh watchdog → postmaster → backends). */
export function processTree(pid: number): number[] {
  const kids = new Map<number, number[]>();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      (kids.get(ppid) ?? kids.set(ppid, []).get(ppid)!).push(Number(d));
    } catch {
      /* gone */
    }
  }
  const out: number[] = [];
  const walk = (p: number) => (out.push(p), (kids.get(p) ?? []).forEach(walk));
  walk(pid);
  return out;
}

/** CPU seconds used so far by the server Postgres running on this machine. */
export const postgresCpuSeconds = (): number => postgresPids().reduce((s, p) => s + cpuSecondsOf(p), 0);

/** Whether `taskset` can pin processes here. */
export const canPin = (): boolean =>
  spawnSync("taskset", ["-p", String(process.pid)], { stdio: "ignore" }).status === 0;

/** Pins a running process and all its threads to `cpus` ("0", "1", "0-1"); false if it could not. */
export const pin = (pid: number, cpus: string): boolean =>
  spawnSync("taskset", ["-a", "-p", "-c", cpus, String(pid)], { stdio: "ignore" }).status === 0;
