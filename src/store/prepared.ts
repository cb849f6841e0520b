/**
 * Named prepared statements for every parameterised statement of a pool: the server parses and
 * plans a statement's text once per connection instead of on every call. Our statements are
 * few (a dozen on a run's path) and long (a checkpoint with its blobs, a run's sync with its
 * events: 1–3 KB of SQL), and the database shares the machine's cores with the runtime (PGlite
 * runs on its very thread). Measured side by side (README "Benchmarks"): fewer ms per step and
 * per trivial run for the runtime and for bare LangGraph on the same saver alike.
 *
 * - Only statements with parameters (`query(text, values)`), whose text is fixed SQL: values
 *   never enter a text here. A connection names at most MAX_NAMED distinct texts; others go
 *   unnamed, so a text built per call could never grow a session's statements without bound.
 *   The bound is the connection's, not the process's: a process serving several schemas (texts
 *   name their schema) would otherwise stop naming on a connection that has named nothing.
 * - Names are per client (`tc<client>_<hash of the text>`): PGlite's socket server puts every
 *   client on one session, where a name of a client gone (a replaced connection) still exists.
 * - A plan gone stale (a column added under a `SELECT *`) sends that text unnamed on that client.
 * - Off with TOOLCHAIN_PG_PREPARED=0, for a transaction-mode pooler in front of Postgres
 *   (PgBouncer before 1.21) that would hand a statement's Bind to another server connection.
 */
import { createHash } from "node:crypto";
import type pg from "pg";

export const MAX_NAMED = 500;
/**
 * "cached plan must not change result type": a `SELECT *` / `RETURNING *` prepared before a
 * migration (of a newer process) changed its table's columns is refused on every call after, so
 * that client sends the text unnamed from then on, as before this module.
 */
const STALE_PLAN = "0A000";
let clients = 0;

/** Whether TOOLCHAIN_PG_PREPARED leaves prepared statements on (anything but 0 / false / off). */
export function preparedStatementsEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env.TOOLCHAIN_PG_PREPARED?.trim().toLowerCase();
  return !(v === "0" || v === "false" || v === "off" || v === "no");
}

const hashOf = (text: string) => createHash("sha1").update(text).digest("hex").slice(0, 20);

const installed = new WeakSet<pg.Pool>();

/** Every client this pool hands out (those connected before this too) names its parameterised statements. */
export function usePreparedStatements(pool: pg.Pool): void {
  if (installed.has(pool)) return;
  installed.add(pool);
  const seen = new WeakSet<object>();
  pool.on("acquire", (client) => {
    if (seen.has(client)) return;
    seen.add(client);
    const prefix = `tc${++clients}_`;
    const names = new Map<string, string>(); // text → its name on this client (at most MAX_NAMED)
    const stale = new Set<string>(); // texts whose prepared plan went stale on this client
    const nameOf = (text: string): string | undefined => {
      let name = names.get(text);
      if (name === undefined && names.size < MAX_NAMED) names.set(text, (name = prefix + hashOf(text)));
      return name;
    };
    const orig = client.query.bind(client) as (...a: unknown[]) => unknown;
    // a stale plan is refused before it runs: outside a transaction, the unnamed retry is the
    // call's only execution; inside one the transaction is lost either way and fails as it would
    const retryable = (e: unknown, text: string) => {
      const err = e as { code?: string; message?: string };
      if (err.code !== STALE_PLAN || !/cached plan/.test(err.message ?? "")) return false;
      stale.add(text);
      return client.getTransactionStatus() === "I";
    };
    client.query = function (this: unknown, ...args: unknown[]) {
      const [text, values, cb] = args;
      if (typeof text !== "string" || !Array.isArray(values) || stale.has(text)) return orig(...args);
      const name = nameOf(text);
      if (name === undefined) return orig(...args);
      const config = { name, text, values };
      if (typeof cb === "function")
        return orig(config, (e: unknown, r: unknown) =>
          e && retryable(e, text) ? orig(text, values, cb) : (cb as (e: unknown, r: unknown) => void)(e, r),
        );
      return (orig(config) as Promise<unknown>).catch((e: unknown) => {
        if (retryable(e, text)) return orig(text, values);
        throw e;
      });
    } as typeof client.query;
  });
}
