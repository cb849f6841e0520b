/**
 * A run's final projection in its final checkpoint's statement.
 *
 * A drive that ends a run wrote the run's last checkpoint (LangGraph's `put`) and then, once the
 * stream ended, the run row and step rows with the lease released (`RunStore.sync`): two
 * statements, two commits, one after the other. When the checkpoint being saved is a run that
 * ended, with nothing left for the drive after it (no decision to mark applied, no event left to
 * store), the projection is already known from that checkpoint's state: it rides in the same
 * statement (src/store/saver.ts `putWith`), so both commit or neither does, in one round trip.
 *
 * The drive offers the ride through its stream's `configurable` (the key below), so only that
 * drive's own checkpoints can carry it (LangGraph passes the stream's configurable to every
 * `put`); the drive decides per checkpoint (`FinalRide`), and does the ordinary sync when no
 * checkpoint carried it or when the state it streamed last is not the one that rode.
 */
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import type { StatementRider } from "../store/statement-rider.js";

export const FINAL_RIDE_KEY = "toolchain_final_ride";

/** Asked with each root checkpoint's state: the write to ride in its statement, or undefined. */
export type FinalRide = (values: unknown) => Promise<StatementRider | undefined>;

type PutWith = (
  ...a: [...Parameters<BaseCheckpointSaver["put"]>, StatementRider | undefined]
) => ReturnType<BaseCheckpointSaver["put"]>;

/** The stream's configurable entry for a drive that offers a final ride. */
export const finalRideKey = (ride: FinalRide | undefined): Record<string, FinalRide> =>
  ride ? { [FINAL_RIDE_KEY]: ride } : {};

/** Whether checkpoints of this saver can carry a ride (a saver writing to the run store's database). */
export function canRide(saver: BaseCheckpointSaver): boolean {
  return typeof (saver as { putWith?: unknown }).putWith === "function";
}

/** The saver, with a drive's root checkpoints offered to its ride. */
export function rideFinalCheckpoints(saver: BaseCheckpointSaver): BaseCheckpointSaver {
  if (!canRide(saver)) return saver;
  const putWith = (saver as unknown as { putWith: PutWith }).putWith.bind(saver);
  const wrapped = Object.create(saver) as BaseCheckpointSaver;
  wrapped.put = async (config, checkpoint, metadata, versions) => {
    const c = config.configurable as Record<string, unknown> | undefined;
    const ride = c?.[FINAL_RIDE_KEY] as FinalRide | undefined;
    const rider = ride && !c?.checkpoint_ns ? await ride(checkpoint.channel_values) : undefined;
    return putWith(config, checkpoint, metadata, versions, rider);
  };
  return wrapped;
}
