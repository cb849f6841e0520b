/**
 * Every commit of the database layer is a named crash point, by construction (the crash-point
 * suite, `npm run test:faults`). Installed on a pool only when the process was started with
 * TOOLCHAIN_FAULT or TOOLCHAIN_FAULT_RECORD (src/kernel/faults.ts): otherwise the pool is left
 * untouched and production pays nothing.
 *
 * A commit is a write statement outside a transaction (INSERT / UPDATE / DELETE / MERGE, a
 * data-modifying CTE, a SELECT calling one of our schema's functions or pg_notify) that changed
 * something, or a COMMIT of a transaction that wrote. Its point is named after the SQL, so a
 * boundary moved or deleted in the code changes the recorded set:
 * `db_commit:<verb>.<table>[(<first SET column>[=null])]` (the writes of a statement or a
 * transaction sorted and joined by `+`), and the checkpoint saver's two statements
 * `checkpoint:put` / `checkpoint:putWrites`. The point passes right after the server answered,
 * before the caller learns of it: a kill there leaves the commit durable and unseen.
 * A statement that changed no row (rowCount 0) is no boundary: the state is the previous one.
 */
import type pg from "pg";
import { faultsActive, passPoint } from "../kernel/faults.js";

const WRITE_RE =
  /\b(insert\s+into|update|delete\s+from|merge\s+into)\s+((?:"[^"]+"|\w+)(?:\.(?:"[^"]+"|\w+))?)(?:\s+(?:as\s+)?(?!set\b)\w+)?(?:\s+set\s+(\w+)(\s*=\s*null\b)?)?/gi;
// a schema-qualified function call, not a table named before its column list (INSERT INTO t (…))
const CALL_RE = /(\b(?:into|update|from|join|table)\s+)?(?:"[^"]+"|\b\w+)\.("?)(\w+)\2\s*\(|\b(pg_notify)\s*\(/gi;
const NOT_TABLES = new Set(["set", "skip", "of", "nowait"]);
const unquote = (s: string) => s.replace(/"/g, "").split(".").at(-1)!.toLowerCase();

/** The writes a statement makes, as `verb.table[(column)]` in the order they appear (empty: a read). */
export function writesOf(sql: string): string[] {
  const out: string[] = [];
  for (const m of sql.matchAll(WRITE_RE)) {
    const table = unquote(m[2]!);
    if (NOT_TABLES.has(table)) continue; // ON CONFLICT DO UPDATE SET, FOR UPDATE SKIP LOCKED
    const verb = m[1]!.split(/\s+/)[0]!.toLowerCase();
    const column = verb === "update" && m[3] ? `(${m[3].toLowerCase()}${m[4] ? "=null" : ""})` : "";
    out.push(`${verb}.${table}${column}`);
  }
  if (sql.includes(TASK_RESULT_MARK)) out.push(TASK_RESULT);
  if (/^\s*(with|select)\b/i.test(sql))
    for (const m of sql.matchAll(CALL_RE)) {
      if (m[1]) continue;
      const fn = (m[3] ?? m[4])!.toLowerCase();
      if (m[4] || fn.startsWith("tool_chain_") || fn.startsWith("qtable_")) out.push(`call.${fn}`);
    }
  return out;
}

/**
 * The marker of a statement carrying a functional task's result with events riding
 * (src/runtime/task-ride.ts), reported by `writesOf` as this pseudo-write: the statement's SQL
 * is a node's ride's, and a crash point must still tell the two apart.
 */
export const TASK_RESULT_MARK = "/* task result */";
export const TASK_RESULT = "ride.task_result";

/**
 * The point a commit of these writes passes: the same set of writes is the same boundary, whether
 * one statement or a transaction makes it (the event log appends either way, by contention).
 * Every commit of checkpoint writes starts `checkpoint:putWrites` (plain; `+<what rides>` for a
 * node's writes carrying events; `(task)+<what rides>` for a task's result carrying them), so
 * `checkpoint:putWrites*` counts them all (src/kernel/faults.ts).
 */
export function commitPointName(writes: readonly string[]): string {
  if (writes.includes("insert.checkpoints")) return "checkpoint:put";
  if (writes.includes("insert.checkpoint_writes")) {
    const head = writes.includes(TASK_RESULT) ? "checkpoint:putWrites(task)" : "checkpoint:putWrites";
    const rest = [...new Set(writes)].filter((w) => w !== "insert.checkpoint_writes" && w !== TASK_RESULT).sort();
    return rest.length ? `${head}+${rest.join("+")}` : head;
  }
  return `db_commit:${[...new Set(writes)].sort().join("+")}`;
}

type Res = { command?: string; rowCount?: number | null } | { command?: string; rowCount?: number | null }[];
const changed = (r: Res | undefined) =>
  Array.isArray(r) ? r.some((x) => (x.rowCount ?? 1) > 0) : (r?.rowCount ?? 1) > 0;

/**
 * What a statement's observer sees once the server answered (`res`) or refused (`failed`). One
 * observer per client and user of the seam: commit points track the client's transaction.
 */
type StatementObserver = (text: string, res: Res | undefined, failed: boolean) => void;

/** Per pool: each user of the seam, making its observer for a client. */
const USERS = Symbol("statementUsers");
type Instrumented = pg.Pool & { [USERS]?: Set<() => StatementObserver> };

/**
 * The one seam over the database layer: every statement of every client this pool hands out
 * (pool.query runs on one too, as do clients made before this was installed, via "acquire")
 * reaches the observers `perClient` makes, one per client. Returns a function that removes it.
 */
function observeStatements(pool: pg.Pool, perClient: () => StatementObserver): () => void {
  const p = pool as Instrumented;
  let users = p[USERS];
  if (!users) {
    const all = (users = p[USERS] = new Set());
    const seen = new WeakSet<object>();
    pool.on("acquire", (client) => {
      if (seen.has(client)) return;
      seen.add(client);
      const mine = new Map<() => StatementObserver, StatementObserver>();
      instrument(client, (text, res, failed) => {
        for (const make of all) {
          let o = mine.get(make);
          if (!o) mine.set(make, (o = make()));
          o(text, res, failed);
        }
      });
    });
  }
  users.add(perClient);
  return () => void users.delete(perClient);
}

const commitPointsInstalled = new WeakSet<pg.Pool>();

/** Crash points at every commit of this pool's clients: only under the fault suite. */
export function installCommitPoints(pool: pg.Pool): void {
  if (!faultsActive() || commitPointsInstalled.has(pool)) return;
  commitPointsInstalled.add(pool);
  observeStatements(pool, commitTracker);
}

/** Statements a pool's clients sent (each one round trip), and how many saved a checkpoint. */
export interface StatementCount {
  roundTrips: number;
  checkpointPuts: number;
  /** Reads of the checkpoints table (LangGraph's getTuple/list). */
  checkpointReads: number;
  /** Statements per write they make (`insert.checkpoints`, `call.pg_notify`, ...: `writesOf`), each counted once per statement. */
  writes: Record<string, number>;
  /** Each statement's writes (`writesOf`), in the order they were sent. */
  statements: string[][];
  stop(): void;
}

/**
 * Count the statements of this pool from now on (the bench's round trips per run). A statement
 * is one round trip to the server, refused ones included; a checkpoint put is one that inserted
 * into LangGraph's `checkpoints` table (one per superstep, the input's included).
 */
export function countStatements(pool: pg.Pool): StatementCount {
  const count: StatementCount = {
    roundTrips: 0,
    checkpointPuts: 0,
    checkpointReads: 0,
    writes: {},
    statements: [],
    stop: () => stop(),
  };
  const stop = observeStatements(pool, () => (text) => {
    count.roundTrips++;
    if (/^\s*select\b/i.test(text) && /\bcheckpoints\b/i.test(text)) count.checkpointReads++;
    const writes = new Set(writesOf(text));
    count.statements.push([...writes]);
    if (writes.has("insert.checkpoints")) count.checkpointPuts++;
    for (const w of writes) count.writes[w] = (count.writes[w] ?? 0) + 1;
  });
  return count;
}

/** A client's commits, as crash points: a write outside a transaction that changed a row, or a COMMIT of one that wrote. */
function commitTracker(): StatementObserver {
  let tx: { writes: string[]; changed: boolean } | undefined;
  return (text, res, failed) => {
    if (failed) {
      if (tx && /^\s*commit\b/i.test(text)) tx = undefined;
      return;
    }
    const verb = /^\s*(\w+)/.exec(text)?.[1]?.toUpperCase();
    if (verb === "BEGIN" || (verb === "START" && /^\s*start\s+transaction/i.test(text))) {
      tx = { writes: [], changed: false };
      return;
    }
    if (verb === "ROLLBACK" || verb === "ABORT") return void (tx = undefined);
    if (verb === "COMMIT" || verb === "END") {
      const t = tx;
      tx = undefined;
      const first = Array.isArray(res) ? res[0] : res;
      if (t?.writes.length && t.changed && first?.command !== "ROLLBACK") passPoint(commitPointName(t.writes));
      return;
    }
    const writes = writesOf(text);
    if (!writes.length) return;
    if (tx) {
      tx.writes.push(...writes);
      tx.changed ||= changed(res);
    } else if (changed(res)) passPoint(commitPointName(writes));
  };
}

function instrument(client: pg.PoolClient | pg.Client, observe: StatementObserver): void {
  const orig = client.query.bind(client) as (...a: unknown[]) => unknown;
  client.query = function (this: unknown, ...args: unknown[]) {
    const first = args[0] as string | { text?: string; submit?: unknown } | undefined;
    const text = typeof first === "string" ? first : typeof first?.text === "string" ? first.text : undefined;
    if (text === undefined || (typeof first === "object" && typeof first?.submit === "function")) return orig(...args); // a Submittable (cursor, stream): not used for writes here
    const cbAt = args.findIndex((a) => typeof a === "function");
    if (cbAt >= 0) {
      const cb = args[cbAt] as (e: unknown, r: Res) => void;
      args[cbAt] = (e: unknown, r: Res) => {
        observe(text, e ? undefined : r, Boolean(e));
        cb(e, r);
      };
      return orig(...args);
    }
    return (orig(...args) as Promise<Res>).then(
      (r) => {
        observe(text, r, false);
        return r;
      },
      (e: unknown) => {
        observe(text, undefined, true);
        throw e;
      },
    );
  } as typeof client.query;
}
