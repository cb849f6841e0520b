/**
 * Named prepared statements for every parameterised statement of a pool: the server parses and
 * plans a statement's text once per connection instead of on every call. Our statements are
 * few (a dozen on a run's path) and long (a checkpoint with its blobs, a run's sync with its
 * events: 1–3 KB of SQL), and the database shares the machine's cores with the runtime (PGlite
 * runs on its very thread). Measured side by side (README "Benchmarks"): fewer ms per step and
 * per trivial run for the runtime and for bare LangGraph on the same saver alike.
 *
 * - Only statements with parameters (`query(text, values)`), whose text is fixed SQL: values
 *   never enter a text here. A process names at most MAX_NAMED distinct texts; others go unnamed,
 *   so a text built per call could never grow a session's statements without bound.
 * - Names are per client (`tc<client>_<hash of the text>`): PGlite's socket server puts every
 *   client on one session, where a name of a client gone (a replaced connection) still exists.
 * - Off with TOOLCHAIN_PG_PREPARED=0, for a transaction-mode pooler in front of Postgres
 *   (PgBouncer before 1.21) that would hand a statement's Bind to another server connection.
 */
import { createHash } from "node:crypto";
import type pg from "pg";

export const MAX_NAMED = 500;
const hashes = new Map<string, string>();
let clients = 0;

/** Whether TOOLCHAIN_PG_PREPARED leaves prepared statements on (anything but 0 / false / off). */
export function preparedStatementsEnabled(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = env.TOOLCHAIN_PG_PREPARED?.trim().toLowerCase();
  return !(v === "0" || v === "false" || v === "off" || v === "no");
}

/** Distinct texts named in this process so far (at most MAX_NAMED). */
export const namedTexts = (): number => hashes.size;

function hashOf(text: string): string | undefined {
  let h = hashes.get(text);
  if (h === undefined && hashes.size < MAX_NAMED) {
    h = createHash("sha1").update(text).digest("hex").slice(0, 20);
    hashes.set(text, h);
  }
  return h;
}

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
    const orig = client.query.bind(client) as (...a: unknown[]) => unknown;
    client.query = function (this: unknown, ...args: unknown[]) {
      const [text, values] = args;
      if (typeof text === "string" && Array.isArray(values)) {
        const h = hashOf(text);
        if (h !== undefined) return orig({ name: prefix + h, text, values }, ...args.slice(2));
      }
      return orig(...args);
    } as typeof client.query;
  });
}
