/**
 * One write riding in another's statement (one round trip, one commit): a run's final projection
 * in its final checkpoint's statement (src/store/saver.ts `putWith`, src/runtime/final-ride.ts), a
 * node's events in its writes' statement (`putWritesWith`, src/runtime/events-ride.ts).
 */

/**
 * A write that rides in a checkpoint's statement: its data-modifying CTEs and the SELECT that
 * reports them, with parameters numbered from `base + 1` (the checkpoint's come first).
 */
export interface StatementRider {
  sql(base: number): { ctes: string; select: string };
  params: unknown[];
  /**
   * A condition on the rider's CTEs (e.g. `EXISTS (SELECT 1 FROM ru)`) the carrying write is made
   * on: when it fails, nothing of the statement is written (putWritesWith).
   */
  guard?: string;
  /** The SELECT's row, once the statement committed; throwing fails the put. */
  committed(row: Record<string, unknown>): void;
}

/** `$n` → `$(n + base)`: a statement's parameters moved behind another's. */
export function shiftParams(sql: string, base: number): string {
  return sql.replace(/\$(\d+)/g, (_, n: string) => `$${Number(n) + base}`);
}
