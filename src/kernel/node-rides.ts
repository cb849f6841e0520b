/**
 * How a node's events ride in its writes' statement (src/runtime/events-ride.ts): what a drive
 * offers its nodes (graphs/emit.ts) and its saver through the stream's `configurable`.
 */
import type { StatementRider } from "../store/statement-rider.js";

export const EVENTS_RIDE_KEY = "toolchain_events_ride";

/** A node's writes, put with the rider given (undefined: on their own). */
export type PutWrites = (rider: StatementRider | undefined) => Promise<void>;

export interface NodeRides {
  /** A node returned having emitted `keys`: true when they will be stored with its writes (it need not wait). */
  offer(taskId: string, keys: string[]): boolean;
  /** The node task's writes are being put: their statement, carrying its events; undefined: put them as usual. */
  claim(taskId: string, put: PutWrites): Promise<void> | undefined;
  /**
   * A functional task's result is being put (src/runtime/task-ride.ts): the events buffered now
   * ride in its statement once `before` (the writes started before it) settled; undefined when
   * they cannot (nothing buffered, or a batch is being cut: the result is put as usual).
   */
  rideTask(put: PutWrites, before: () => Promise<unknown>): Promise<void> | undefined;
}

/** The drive's rides, from a node's or a write's configurable. */
export function ridesOf(configurable: Record<string, unknown> | undefined): NodeRides | undefined {
  return configurable?.[EVENTS_RIDE_KEY] as NodeRides | undefined;
}
