/**
 * Approval state is durable, with real processes on the configured database (server Postgres
 * with DATABASE_URL, else embedded PGlite on disk): a quorum of 2 with one approval survives
 * SIGKILL of every process and is completed by a second approver in a new process (the effect
 * happens once); an approval deadline passes while no process runs and the next process's worker
 * loop rejects it as the expiry principal (the effect never happens), with the event and the metric.
 */
import { afterAll, describe, expect, test } from "vitest";
import pg from "pg";
import { sharedStorage, spawnChild, type ChildEnv } from "./helpers/child.js";
import { serverUrl } from "./helpers/backends.js";

const SCRIPT = "test/fixtures/approver-child.ts";

interface Report {
  report: {
    status: string;
    steps: { stepId: string; status: string; decision: Record<string, unknown> | null }[];
    pending: { stepId: string; expiresAt?: string; onExpiry?: string }[];
    events: { type: string; stepId: string | null; data: Record<string, unknown> }[];
  };
  effects: { label: string; pid: number }[];
  expiredMetric: string;
}
const reportOf = (lines: Record<string, unknown>[]) => lines.find((l) => "report" in l) as unknown as Report;

const schemas: string[] = [];
afterAll(async () => {
  if (!serverUrl) return;
  const pool = new pg.Pool({ connectionString: serverUrl, max: 1 });
  for (const s of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`).catch(() => undefined);
  await pool.end();
});
function storage(): ChildEnv {
  const s = sharedStorage();
  schemas.push(s.schema);
  return s;
}
async function finished(st: ChildEnv, args: string[], env: Record<string, string> = {}) {
  const c = spawnChild(st, args, env, SCRIPT);
  await c.exited;
  const err = c.lines.find((l) => "error" in l);
  if (err) throw new Error(`child failed: ${String(err.error)}\n${c.stderr().slice(-2000)}`);
  return c.lines;
}

describe("durable approvals (real processes)", () => {
  test("quorum 2: one approval survives SIGKILL of every process; a second approver in a new process completes it, the effect happens once", async () => {
    const st = storage();
    const runId = "quorum-kill";
    const starter = spawnChild(st, ["start", runId, "test.quorum2"], { HOLD: "1" }, SCRIPT);
    await starter.waitFor((l) => l.waiting === "waiting_confirmation", 150_000);
    // embedded storage is one process at a time: the starter dies before the first approver opens it
    const kill = async (c: typeof starter) => (c.proc.kill("SIGKILL"), await c.exited);
    if (!serverUrl) await kill(starter);
    const first = spawnChild(st, ["vote", runId, "grace", "approve"], { HOLD: "1" }, SCRIPT);
    const counted = await first.waitFor((l) => "report" in l, 150_000);
    expect((counted as unknown as Report).report.status).toBe("waiting_confirmation");
    // every process that touched the run dies by SIGKILL (on a server: both at once)
    await Promise.all([kill(starter), kill(first)]);

    // grace's exact repeat in a new process is counted once; the requester still cannot approve
    const repeat = reportOf(await finished(st, ["vote", runId, "grace", "approve"]));
    expect(repeat.report.status).toBe("waiting_confirmation");
    expect(repeat.effects).toEqual([]);
    const self = await finished(st, ["vote", runId, "ada", "approve"]).catch((e: Error) => e.message);
    expect(String(self)).toContain("allowRequester");

    const done = reportOf(await finished(st, ["vote", runId, "linus", "approve"]));
    expect(done.report.status).toBe("completed");
    expect(done.effects.map((e) => e.label)).toEqual([runId]);
    expect(done.report.steps[0]!.decision).toMatchObject({
      decision: "approve",
      by: { kind: "user", id: "linus" },
      via: "cli",
      approvals: [{ by: { id: "grace" } }, { by: { id: "linus" } }],
    });
    expect(done.report.events.filter((e) => e.type === "approval_given")).toHaveLength(1);
  }, 600_000);

  test("expiry across a restart: the deadline passes with no process up; the next worker rejects it as the expiry principal, the effect never happens", async () => {
    const st = storage();
    const runId = "expiry-restart";
    // the first runtime records the wait with its deadline, then closes (it runs no worker loop)
    const started = await finished(st, ["start", runId, "test.expiring"]);
    const wait = started.find((l) => "waiting" in l) as { waiting: string; pending: Report["report"]["pending"] };
    expect(wait.waiting).toBe("waiting_confirmation");
    expect(wait.pending).toEqual([expect.objectContaining({ stepId: "s", onExpiry: "reject" })]);
    const deadline = Date.parse(wait.pending[0]!.expiresAt!);
    expect(deadline).toBeGreaterThan(Date.now() + 30_000); // 60 s: it cannot expire before the restart

    // a new process whose clock is past the deadline: its worker loop applies the expiry
    const r = reportOf(await finished(st, ["worker", runId], { CLOCK_OFFSET_MS: "120000" }));
    expect(r.report.status).toBe("failed");
    expect(r.effects).toEqual([]);
    const expiry = { kind: "service", id: "toolchain:expiry", name: "approval expiry" };
    expect(r.report.events.find((e) => e.type === "approval_expired")!.data).toMatchObject({
      stepId: "s",
      round: 0,
      expiresAt: wait.pending[0]!.expiresAt,
      onExpiry: "reject",
      outcome: "rejected",
      by: expiry,
      via: "system",
    });
    expect(r.report.events.find((e) => e.type === "step_confirmed")!.data).toMatchObject({
      decision: "reject",
      by: expiry,
      via: "system",
    });
    expect(r.report.steps[0]).toMatchObject({ status: "failed", decision: { decision: "reject", by: expiry } });
    expect(r.expiredMetric).toContain('toolchain_approvals_expired_total{outcome="rejected"} 1');

    // once handled, never again: another process past the deadline changes nothing
    const again = reportOf(await finished(st, ["report", runId], { CLOCK_OFFSET_MS: "240000" }));
    expect(again.report.events.filter((e) => e.type === "approval_expired")).toHaveLength(1);
  }, 600_000);
});
