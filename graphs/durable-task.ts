/**
 * Durable units of work inside a node, as functional-API tasks.
 *
 * LangGraph identifies a task by uuid5(namespace, superstep, task NAME, parent task, CALL COUNTER)
 * under the node's checkpoint (pregel/algo.js `_prepareSingleTask`). The counter is call order,
 * and our scheduler launches work in completion order, which is timing-dependent: when a node
 * re-executes (resume, crash recovery) cached results would be matched to the wrong calls.
 *
 * So every durable task carries its full identity, `(kind, step, attempt, round)`, in its name,
 * and the counter is pinned to the step's index right before the call. A task's id is then a pure
 * function of what it is: replay finds exactly the results it wrote, and two distinct pieces of
 * work (a reconcile of attempt 1 and of attempt 2; the decision of round 0 and of round 1) can
 * never share a saved result. `test/durable-identity.property.test.ts` checks the injectivity;
 * `test/replay.test.ts` fails if the pinning ever stops holding.
 */
import { task } from "@langchain/langgraph";
import type { LangGraphRunnableConfig } from "@langchain/langgraph";
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";

const SCRATCHPAD = "__pregel_scratchpad";

export type TaskKind =
  "preview" | "preview_fallback" | "step" | "fallback" | "reconcile" | "reconcile_fallback" | "decision" | "compensate";

export interface TaskIdentity {
  kind: TaskKind;
  stepId: string;
  /** The step's index in the plan (unique per step). */
  stepIndex: number;
  /** step / fallback / compensate: the attempt number; reconcile(_fallback): the attempt being reconciled. */
  attempt?: number;
  /** decision: the wait round answered; compensate: the operator round (0 before any decision). */
  round?: number;
}

/**
 * `kind.stepId[#aN][#rN]`. Step ids match /^[A-Za-z][A-Za-z0-9_-]*$/ (no "." or "#"), so the
 * name parses back to its identity: distinct identities give distinct names.
 */
export function taskName(t: TaskIdentity): string {
  let name = `${t.kind}.${t.stepId}`;
  if (t.attempt !== undefined) name += `#a${t.attempt}`;
  if (t.round !== undefined) name += `#r${t.round}`;
  return name;
}

/** What LangGraph hashes into the task id besides the node's checkpoint: (name, counter). */
export function taskKey(t: TaskIdentity): { name: string; counter: number } {
  return { name: taskName(t), counter: t.stepIndex };
}

export function callDurable<T>(config: LangGraphRunnableConfig, t: TaskIdentity, fn: () => Promise<T>): Promise<T> {
  const pad = (config.configurable as Record<string, unknown> | undefined)?.[SCRATCHPAD] as
    { callCounter?: number } | undefined;
  if (!pad || typeof pad.callCounter !== "number") {
    throw new Error("callDurable must run inside a LangGraph node (no scratchpad found)");
  }
  const { name, counter } = taskKey(t);
  const parent = config.signal;
  if (!parent) {
    pad.callCounter = counter;
    return task({ name }, fn)() as Promise<T>;
  }
  const fan = fanOut(parent);
  if (fan.direct < DIRECT_TASKS) {
    // few tasks in flight on this node's signal (a chain: one): they listen on it themselves
    fan.direct++;
    inFlight++;
    pad.callCounter = counter;
    return (task({ name }, fn)() as Promise<T>).finally(() => {
      fan.direct--;
      inFlight--;
    });
  }
  const own = fan.child();
  return withSignal(own.signal, () => {
    pad.callCounter = counter;
    return task({ name }, fn)() as Promise<T>;
  }).finally(() => fan.release(own));
}

/**
 * Tasks in flight that listen on their node's signal directly: well below Node's warning
 * threshold (10 listeners per signal, LangGraph's own included). Beyond it, each task gets a
 * signal of its own (below); a controller and a derived async-local store per task cost ~3% of a
 * chain's CPU per step, measured, which a chain (one task at a time) no longer pays.
 */
const DIRECT_TASKS = 4;

/**
 * Why tasks get a signal of their own: a functional-API task inherits its node's signal through
 * async-local config, and @langchain/core's `raceWithSignal` adds one abort listener per running
 * task to it. A node with more than 10 tasks in flight then trips Node's
 * MaxListenersExceededWarning on that signal (a fresh one per superstep, so raising the limit on
 * the run's signal never reached it). Instead, the node's signal carries ONE listener that aborts
 * the per-task controllers of the tasks in flight (same reason), and each task's controller
 * leaves the set when the task settles: nothing grows with the width of the run.
 */
let inFlight = 0;
/** Durable tasks in flight in this process, across runs (for soak and growth tests). */
export function durableTasksInFlight(): number {
  return inFlight;
}

class FanOut {
  private readonly live = new Set<AbortController>();
  /** Tasks in flight on the parent signal itself (callDurable). */
  direct = 0;
  constructor(private readonly parent: AbortSignal) {
    parent.addEventListener(
      "abort",
      () => {
        for (const c of this.live) c.abort(parent.reason);
        this.live.clear();
      },
      { once: true },
    );
  }
  child(): AbortController {
    const c = new AbortController();
    inFlight++;
    if (this.parent.aborted) c.abort(this.parent.reason);
    else this.live.add(c);
    return c;
  }
  release(c: AbortController): void {
    inFlight--;
    this.live.delete(c);
  }
}

const fanOuts = new WeakMap<AbortSignal, FanOut>();
function fanOut(parent: AbortSignal): FanOut {
  let f = fanOuts.get(parent);
  if (!f) fanOuts.set(parent, (f = new FanOut(parent)));
  return f;
}

// @langchain/core keeps the current runnable config under this registered symbol in the
// async-local store (singletons/async_local_storage). Its public runWithConfig builds a tracing
// RunTree per call (~60 µs here, measured), too much per step: derive the store instead.
const LC_CHILD_CONFIG = Symbol.for("lc:child_config");

/** Run `fn` with the current async-local runnable config, its signal replaced. */
function withSignal<T>(signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
  const storage = AsyncLocalStorageProviderSingleton.getInstance();
  const store = storage.getStore() as { extra?: Record<symbol, unknown> } | undefined;
  const current = store?.extra?.[LC_CHILD_CONFIG] as Record<string, unknown> | undefined;
  if (!store || !current) return fn();
  const derived = Object.create(store) as { extra: Record<symbol, unknown> };
  derived.extra = { ...store.extra, [LC_CHILD_CONFIG]: { ...current, signal } };
  return storage.run(derived, fn) as Promise<T>;
}
