/**
 * The approval-system chain under SIGKILL, with real processes on the configured database
 * (server Postgres with DATABASE_URL, else embedded PGlite on disk): killed while waiting for the
 * records confirmation, inside the records write's transaction, and after the write committed but
 * before its result was saved. Every time, the records exist exactly once afterwards. A re-plan
 * that marked a row removed, killed right after its compensation's undo committed: the row is
 * restored once.
 */
import { afterAll, describe, expect, test } from "vitest";
import pg from "pg";
import { runToEnd, sharedStorage, spawnChild, type ChildEnv } from "./helpers/child.js";
import { serverUrl } from "./helpers/backends.js";
import { rowsOf } from "../skills/qtable/mapping.js";
import type { Task } from "../skills/qtable/schemas.js";

const CHILD = "test/fixtures/qtable-child.ts";
interface Report {
  report: {
    status: string;
    steps: { stepId: string; status: string; attempts: number; output: any }[];
    pending: { stepId: string }[];
  };
  records: { id: string; title: string; start: string; end: string; key: string; status: string }[];
  writes: { idempotency_key: string; record_ids: string[] }[];
}
const reportOf = (lines: Record<string, unknown>[]) => lines.filter((l) => "report" in l).at(-1) as unknown as Report;

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

/** Records created exactly once: one write for the step's key, its records in the table, as the step reports them. */
function expectExactlyOnce(r: Report, runId: string) {
  expect(r.report.status).toBe("completed");
  const tasks = r.report.steps.find((s) => s.stepId === "split")!.output.tasks as Task[];
  const create = r.report.steps.find((s) => s.stepId === "create")!;
  expect(r.writes).toEqual([{ idempotency_key: `${runId}:create`, record_ids: create.output.recordIds }]);
  expect(r.records.map((x) => x.id)).toEqual(create.output.recordIds);
  // the tasks and their phase rows
  expect(r.records.map((x) => x.title)).toEqual(rowsOf({ tasks }).map((t) => t.title));
  for (const rec of r.records) expect(rec.start <= rec.end).toBe(true);
}

const withEnv = (st: ChildEnv, env: Record<string, string>): ChildEnv => ({ ...st, env: { ...st.env, ...env } });

/** Run the chain up to its pause in a first process; it exits by itself. */
async function startToPause(st: ChildEnv, runId: string, ws: string): Promise<void> {
  const r = reportOf(await runToEnd(st, ["start", runId, ws], 120_000, CHILD));
  expect(r.report.status).toBe("waiting_confirmation");
  expect(r.records).toEqual([]);
}

describe("approval-system chain under SIGKILL", () => {
  test("killed while waiting for the records confirmation: another process approves; records once", async () => {
    const st = storage();
    const runId = "qt-crash-waiting";
    const first = spawnChild(st, ["start", runId, "ws-wait"], {}, CHILD);
    await first.waitFor((l) => l.event === "run_waiting_confirmation", 120_000);
    first.proc.kill("SIGKILL");
    await first.exited;
    const approved = reportOf(
      await runToEnd(st, ["confirm", runId, JSON.stringify({ stepId: "create", decision: "approve" })], 120_000, CHILD),
    );
    expectExactlyOnce(approved, runId);
  }, 300_000);

  test("killed inside the records write's transaction: nothing half-written; recovery writes them once", async () => {
    const st = storage();
    const runId = "qt-crash-in-tx";
    await startToPause(st, runId, "ws-tx");
    // the first INSERT of records sleeps 4 s inside its transaction; kill the process in it
    const second = spawnChild(
      st,
      ["confirm", runId, JSON.stringify({ stepId: "create", decision: "approve" })],
      { QTABLE_SLOW_INSERT: "1" },
      CHILD,
    );
    await second.waitFor((l) => l.writing === true, 120_000);
    await new Promise((r) => setTimeout(r, 1_000));
    second.proc.kill("SIGKILL");
    await second.exited;
    expect(second.lines.some((l) => l.written)).toBe(false); // it died before the write returned
    const recovered = reportOf(await runToEnd(st, ["recover"], 120_000, CHILD));
    expectExactlyOnce(recovered, runId);
  }, 300_000);

  test("killed after the write committed, before its result was saved: the repeat returns the same records", async () => {
    const st = storage();
    const runId = "qt-crash-after-write";
    await startToPause(st, runId, "ws-after");
    const second = spawnChild(
      st,
      ["confirm", runId, JSON.stringify({ stepId: "create", decision: "approve" })],
      { TOOLCHAIN_FAULT: "db_commit:insert.qtable_records+insert.qtable_writes*:1" },
      CHILD,
    );
    await second.exited;
    // killed right after the write's transaction committed, before the skill even returned
    expect(second.lines.some((l) => l.writing)).toBe(true);
    expect(second.lines.some((l) => l.written)).toBe(false);
    expect(second.lines.some((l) => "report" in l)).toBe(false); // it was killed
    const recovered = reportOf(await runToEnd(st, ["recover"], 120_000, CHILD));
    expectExactlyOnce(recovered, runId);
    expect(recovered.report.steps.find((s) => s.stepId === "create")!.output.created).toBe(false);
  }, 300_000);

  test("a re-plan that marked a row removed, killed right after its compensation's undo committed: restored once", async () => {
    const st = storage();
    const ws = "ws-undo";
    const full = { QTABLE_GOAL: "Plan an approval system with e-mail notifications and an audit log" };
    const one = reportOf(await runToEnd(withEnv(st, full), ["start", "qt-undo-1", ws], 120_000, CHILD));
    expect(one.report.status).toBe("waiting_confirmation");
    const planned = reportOf(
      await runToEnd(
        st,
        ["confirm", "qt-undo-1", JSON.stringify({ stepId: "create", decision: "approve" })],
        120_000,
        CHILD,
      ),
    );
    expect(planned.report.status).toBe("completed");
    expect(planned.records.find((r) => r.key === "build-audit-log")!.status).toBe("todo");
    // the re-plan without the audit log, with a step after the write that fails
    const smaller = { QTABLE_GOAL: "Plan an approval system with e-mail notifications", QTABLE_FAIL: "1" };
    const two = reportOf(await runToEnd(withEnv(st, smaller), ["start", "qt-undo-2", ws], 120_000, CHILD));
    expect(two.report.status).toBe("waiting_confirmation");
    const killed = spawnChild(
      st,
      ["confirm", "qt-undo-2", JSON.stringify({ stepId: "create", decision: "approve" })],
      {
        TOOLCHAIN_FAULT:
          "db_commit:delete.qtable_records+update.qtable_records(values)+update.qtable_writes(undone_at):1",
      },
      CHILD,
    );
    await killed.exited;
    expect(killed.lines.some((l) => l.written)).toBe(true); // the write (the removal) happened
    expect(killed.lines.some((l) => "report" in l)).toBe(false); // killed in the compensation
    const recovered = reportOf(await runToEnd(st, ["recover"], 120_000, CHILD));
    expect(recovered.report.status).toBe("rolled_back");
    expect(recovered.report.steps.find((s) => s.stepId === "create")!.status).toBe("rolled_back");
    // every row as the first plan left it: the audit log's status restored, nothing else touched
    expect(recovered.records).toEqual(planned.records);
  }, 300_000);
});
