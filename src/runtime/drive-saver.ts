/**
 * The saver a runtime's graph writes through: the user's checkpointer under the layers the drives
 * need, innermost first.
 *
 * 1. final-ride.ts: a run's last root checkpoint may carry its projection (one statement).
 * 2. task-ride.ts: a functional task's result may carry the events it led to. Below the barrier,
 *    which tracks the write from the moment it is put (a flush waits for it, ride included).
 * 3. write-barrier.ts: every write, and each checkpoint saved, tracked per run (events never ahead
 *    of the writes they report).
 * 4. events-ride.ts: a node's writes may carry its events. Above the barrier: a ride first waits
 *    for the writes its events report, and an event batch waiting on the barrier must not wait on
 *    a ride that waits on that batch; the carrying statement itself is tracked below.
 * 5. fresh-thread.ts: a new run's first read of its empty thread answered without a query.
 */
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { answerFreshThreads } from "./fresh-thread.js";
import { canRide, rideFinalCheckpoints } from "./final-ride.js";
import { canCarryEvents, rideNodeWrites } from "./events-ride.js";
import { rideTaskWrites } from "./task-ride.js";
import type { WriteBarrier } from "./write-barrier.js";
import type { RunStore } from "../store/run-store.js";

export function driveSaver(
  checkpointer: BaseCheckpointSaver,
  barrier: WriteBarrier,
  store: Pick<RunStore, "viewGeneration" | "viewChanged">,
): BaseCheckpointSaver {
  // each checkpoint saved moves the embedded store's view version
  const saved = store.viewGeneration ? (runId: string) => store.viewChanged?.(runId) : undefined;
  return answerFreshThreads(
    rideNodeWrites(barrier.wrap(rideTaskWrites(rideFinalCheckpoints(checkpointer), barrier), saved)),
  );
}

/** What a drive may ride on this checkpointer (the drive asks its store too). */
export const ridesOn = (checkpointer: BaseCheckpointSaver) => ({
  finalRide: canRide(checkpointer),
  eventsRide: canCarryEvents(checkpointer),
});
