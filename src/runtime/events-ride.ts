/**
 * A node's events in its writes' statement.
 *
 * A node's events are stored before its writes (graphs/emit.ts eventsBeforeWrites: a process
 * killed between the two would otherwise lose events the node never emits again): an append, and
 * only once it committed, the writes: two round trips, one after the other, at the end of every
 * node run. Where the run store and the saver share a database, the node returns at once and its
 * events ride in the statement of its writes (src/store/saver.ts `putWritesWith`): both commit or
 * neither, and the writes are guarded by the append's own condition (the run row as this drive
 * left it), so an append that would not apply writes nothing at all and the drive falls back to
 * the two statements (src/runtime/event-batches.ts).
 *
 * The drive offers the ride through its stream's `configurable` (src/kernel/node-rides.ts), as it
 * offers the final ride (final-ride.ts): only its own nodes and their writes see it.
 */
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { EVENTS_RIDE_KEY, ridesOf, type NodeRides } from "../kernel/node-rides.js";
import type { PutWritesWith } from "../store/saver.js";

/** The stream's configurable entry for a drive whose nodes' events can ride. */
export const eventsRideKey = (rides: NodeRides | undefined): Record<string, NodeRides> =>
  rides ? { [EVENTS_RIDE_KEY]: rides } : {};

/** Whether writes of this saver can carry events (a saver writing to the run store's database). */
export function canCarryEvents(saver: BaseCheckpointSaver): boolean {
  return typeof (saver as { putWritesWith?: unknown }).putWritesWith === "function";
}

/** The saver, with a drive's root node writes claimed by the ride their node offered. */
export function rideNodeWrites(saver: BaseCheckpointSaver): BaseCheckpointSaver {
  if (!canCarryEvents(saver)) return saver;
  const withRider = (saver as unknown as { putWritesWith: PutWritesWith }).putWritesWith.bind(saver);
  const wrapped = Object.create(saver) as BaseCheckpointSaver;
  wrapped.putWrites = (config, writes, taskId) => {
    const c = config.configurable as Record<string, unknown> | undefined;
    const rides = c?.checkpoint_ns ? undefined : ridesOf(c);
    return (
      rides?.claim(taskId, (rider) => withRider(config, writes, taskId, rider)) ??
      saver.putWrites(config, writes, taskId)
    );
  };
  return wrapped;
}
