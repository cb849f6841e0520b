/**
 * Events after the checkpoint writes they report.
 *
 * LangGraph saves a finished task's result (`checkpointer.putWrites`) in the background: the
 * task's caller, our scheduler, resumes and emits `step_completed` before that write commits. On a
 * server Postgres (a pool of connections) the event batch can commit first; a process killed in
 * between leaves a step shown completed whose result the checkpoint does not have, and the next
 * process executes it again (the crash-point suite found this at `task_returned`). So an event
 * batch is appended only after every task and node write the graph had started for that run when
 * the batch was cut has settled (`test/write-barrier.test.ts`).
 */
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import type { PutWritesWith } from "../store/saver.js";

export class WriteBarrier {
  private readonly inflight = new Map<string, Set<Promise<unknown>>>();

  /**
   * The saver, with its task and node writes tracked per thread (run), calling
   * `checkpointSaved(runId)` after each checkpoint it saved (the embedded view version moves with it).
   */
  wrap(saver: BaseCheckpointSaver, checkpointSaved?: (runId: string) => void): BaseCheckpointSaver {
    const tracked = Object.create(saver) as BaseCheckpointSaver;
    tracked.putWrites = (...args: Parameters<BaseCheckpointSaver["putWrites"]>) =>
      this.track(args[0].configurable?.thread_id, saver.putWrites(...args));
    // a node's writes with its events riding (events-ride.ts) are writes like any other
    const withRider = (saver as { putWritesWith?: PutWritesWith }).putWritesWith;
    if (withRider)
      (tracked as unknown as { putWritesWith: PutWritesWith }).putWritesWith = (...args) =>
        this.track(args[0].configurable?.thread_id, withRider.apply(saver, args));
    tracked.put = (...args: Parameters<BaseCheckpointSaver["put"]>) => {
      const thread = args[0].configurable?.thread_id;
      const saved = saver.put(...args);
      if (checkpointSaved && typeof thread === "string")
        void saved.then(
          () => checkpointSaved(thread),
          () => undefined,
        );
      return saved;
    };
    return tracked;
  }

  /**
   * Resolves once the task and node writes (`putWrites`) started for `threadId` so far have
   * settled (failed ones too: a failed write fails the graph, which the drive reports). LangGraph
   * starts a finished task's write in the microtasks that follow the task's completion, so those
   * run first. Checkpoints (`put`) are not waited for: an event reports a task's or a node's result,
   * which its writes hold (a checkpoint only folds writes already saved into the next state), and
   * a run's final checkpoint waits for the run's last events itself (final-ride.ts).
   */
  async settled(threadId: string): Promise<void> {
    await new Promise((r) => setImmediate(r));
    const writes = this.inflight.get(threadId);
    if (writes?.size) await Promise.allSettled([...writes]);
  }

  /** Writes in flight for a thread (tests). */
  pending(threadId: string): number {
    return this.inflight.get(threadId)?.size ?? 0;
  }

  /** The writes in flight for a thread now, as a copy (a task's write rides on what it saw: task-ride.ts). */
  inflightNow(threadId: string): Set<Promise<unknown>> {
    return new Set(this.inflight.get(threadId));
  }

  private track<T>(threadId: unknown, write: Promise<T>): Promise<T> {
    if (typeof threadId !== "string") return write;
    let writes = this.inflight.get(threadId);
    if (!writes) this.inflight.set(threadId, (writes = new Set()));
    writes.add(write);
    const done = () => {
      writes.delete(write);
      if (!writes.size && this.inflight.get(threadId) === writes) this.inflight.delete(threadId);
    };
    write.then(done, done);
    return write;
  }
}
