/**
 * A new run's first read of its checkpoint, answered without a query.
 *
 * LangGraph starts every stream by reading the thread's latest checkpoint (`getTuple`). For a run
 * whose row this process has just inserted (createRun: an INSERT that fails on an existing run id,
 * and the thread id is the run id; no path deletes run rows) the thread has no checkpoint, so that
 * statement can only answer "none": one of a trivial run's statements (bench/trivial-timeline.ts).
 *
 * The drive passes a one-shot token in the stream's `configurable` (the key below). The first
 * `getTuple` carrying it, for the root namespace and no checkpoint id, is the stream's own
 * initial read (LangGraph reads before any node runs); it consumes the token and answers
 * `undefined`. Every later read with the same config (nodes inherit it) queries the saver as before.
 */
import type { BaseCheckpointSaver } from "@langchain/langgraph";

export const FRESH_THREAD_KEY = "toolchain_fresh_thread";

/** The token a new run's first drive puts in its stream's configurable. */
export interface FreshThreadToken {
  used: boolean;
}

/** The stream's configurable entry for a drive (nothing unless its thread is fresh). */
export const freshThreadKey = (fresh: boolean | undefined): Record<string, FreshThreadToken> =>
  fresh ? { [FRESH_THREAD_KEY]: { used: false } } : {};

/** The saver, with a fresh thread's first read answered from the token. */
export function answerFreshThreads(saver: BaseCheckpointSaver): BaseCheckpointSaver {
  const wrapped = Object.create(saver) as BaseCheckpointSaver;
  wrapped.getTuple = (config) => {
    const c = config.configurable as Record<string, unknown> | undefined;
    const token = c?.[FRESH_THREAD_KEY] as FreshThreadToken | undefined;
    if (token && !token.used && !c?.checkpoint_id && !c?.checkpoint_ns) {
      token.used = true;
      return Promise.resolve(undefined);
    }
    return saver.getTuple(config);
  };
  return wrapped;
}
