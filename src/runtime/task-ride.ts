/**
 * A step's events in its task's write: one statement per chain step where there were two.
 *
 * LangGraph saves a finished functional task's result (`__return__`) in the background, and our
 * scheduler, resuming in the microtasks that follow, emits what that result means
 * (`step_completed`) and starts the next step (`step_started`). Those events may be stored only
 * after the write they report (write-barrier.ts): on its own, each step cost its write, then an
 * event append waiting for it, two round trips in turn (a 20-step chain alone: 46 statements,
 * bare LangGraph 26).
 *
 * Here the write waits one turn of the event loop (the scheduler has then emitted), and the events
 * buffered then ride in its statement (src/store/saver.ts `putWritesWith`, as a node's do:
 * events-ride.ts): the event and the result it reports commit together or not at all. A write may
 * carry only events whose writes are saved or are this one: it rides only when every other write
 * of the run in flight was started before it (those are waited for first), so an event reporting
 * a task that finished during the wait is never stored ahead of that task's result; otherwise, or
 * when a batch is being cut, the write goes as usual and the batch after it (event-batches.ts).
 *
 * Below the write barrier: the barrier tracks the write from the moment LangGraph puts it, so a
 * batch's flush waiting for the run's writes waits for this one, ride included.
 */
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import type { PendingWrite } from "@langchain/langgraph-checkpoint";
import { ridesOf } from "../kernel/node-rides.js";
import type { PutWritesWith } from "../store/saver.js";
import type { StatementRider } from "../store/statement-rider.js";
import { TASK_RESULT_MARK } from "../store/commit-points.js";
import { canCarryEvents } from "./events-ride.js";
import type { WriteBarrier } from "./write-barrier.js";

/** The channel LangGraph writes a functional task's result to (RETURN, not exported by the package). */
const RETURN = "__return__";

/**
 * A task's successful result (an attempt's `{ ok: true, … }`, a preview's): the chain's hot path,
 * whose events (completed, next started) follow at once. A failed one is put at once, as before:
 * what it leads to is a retry's backoff, a halt or a rollback, not the next event, and a halt's
 * records must not overtake it (the cancel-crash test kills between the two).
 */
const succeeded = (w: PendingWrite) => w[0] === RETURN && (w[1] as { ok?: unknown } | null)?.ok === true;

/** The rider, its statement marked as a task result's (its crash point is its own: commit-points.ts). */
function marked(rider: StatementRider): StatementRider {
  return {
    ...rider,
    sql: (base) => {
      const s = rider.sql(base);
      return { ...s, ctes: `${TASK_RESULT_MARK} ${s.ctes}` };
    },
  };
}

export function rideTaskWrites(saver: BaseCheckpointSaver, barrier: WriteBarrier): BaseCheckpointSaver {
  if (!canCarryEvents(saver)) return saver;
  const withRider = (saver as unknown as { putWritesWith: PutWritesWith }).putWritesWith.bind(saver);
  const wrapped = Object.create(saver) as BaseCheckpointSaver;
  wrapped.putWrites = (config, writes, taskId) => {
    const c = config.configurable as Record<string, unknown> | undefined;
    const thread = c?.thread_id;
    const rides = !c?.checkpoint_ns && writes.every(succeeded) ? ridesOf(c) : undefined;
    if (!rides || typeof thread !== "string" || !writes.length) return saver.putWrites(config, writes, taskId);
    // the barrier adds this write once we return: what it holds now was started before it
    const before = barrier.inflightNow(thread);
    return new Promise<void>((r) => setImmediate(r)).then(() => {
      let newer = 0;
      for (const w of barrier.inflightNow(thread)) if (!before.has(w)) newer++;
      const ride =
        newer === 1 // this write only
          ? rides.rideTask(
              (rider) => withRider(config, writes, taskId, rider && marked(rider)),
              () => Promise.allSettled([...before]),
            )
          : undefined;
      return ride ?? saver.putWrites(config, writes, taskId);
    });
  };
  return wrapped;
}
