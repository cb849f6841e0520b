/**
 * Runtimes that can "crash" in process: two or more Runtime instances (distinct owners, like two
 * processes) on one storage (memory, or a Postgres schema: embedded PGlite, or DATABASE_URL), each
 * built over a run store and checkpointer that go dead on `crash()`. A dead runtime's writes fail
 * and its lease is never released or renewed, exactly what another process sees of one that was
 * SIGKILLed: the run's lease expires and a live runtime's `recover()` takes the run over. `restart`
 * replaces the dead runtime with a fresh one under a new owner (the restarted process).
 */
import { MemorySaver, type BaseCheckpointSaver } from "@langchain/langgraph";
import { openRuntime } from "../../src/runtime/open.js";
import { MemoryRunStore } from "../../src/store/memory-run-store.js";
import { MemoryLimits } from "../../src/store/memory-limits.js";
import { PgRunStore } from "../../src/store/pg-run-store.js";
import { PgLimits } from "../../src/store/limits-store.js";
import type { RunStore } from "../../src/store/run-store.js";
import { Runtime, type RuntimeOptions } from "../../src/runtime/runtime.js";
import { freshSchema, serverUrl } from "./backends.js";

type Opts = Omit<RuntimeOptions, "checkpointer" | "store" | "owner" | "limits">;

export interface CrashableProcess {
  runtime: Runtime;
  owner: string;
  dead: boolean;
  /** I/O calls this process started and that have not settled (a crash does not stop them). */
  inFlight: Set<Promise<unknown>>;
}

export interface CrashableWorld {
  name: string;
  procs: CrashableProcess[];
  /** The runtime's process dies: every later write of it fails, its leases stay until they expire. */
  crash(i: number): void;
  /**
   * Resolves once every write the process had already sent when it died has landed or failed, as
   * a SIGKILLed process's last statements do on the server: what others read after it is final.
   */
  settled(i: number): Promise<void>;
  /** A new process (new owner) in slot i on the same storage. */
  restart(i: number): void;
  close(): Promise<void>;
}

const DEAD = () => Promise.reject(Object.assign(new Error("process crashed (test)"), { code: "ECONNRESET" }));

/** Synchronous helpers (no I/O): a dead process would still compute them. */
const SYNC = new Set<PropertyKey>([
  "getNextVersion",
  "onChange",
  "viewGeneration",
  "viewChanged",
  "constructor",
  // a write riding in another statement, built in memory: its statement is the I/O
  "appendRider",
  "syncRider",
]);

/**
 * A view of `target` whose I/O methods fail once `isDead()`, as a dead process's connection would;
 * calls started before are tracked in `inFlight` until they settle.
 */
function deadable<T extends object>(target: T, isDead: () => boolean, inFlight: Set<Promise<unknown>>): T {
  return new Proxy(target, {
    get(t, prop, recv) {
      const v = Reflect.get(t, prop, recv);
      if (typeof v !== "function") return v;
      if (SYNC.has(prop)) return (v as (...a: unknown[]) => unknown).bind(t);
      return (...args: unknown[]) => {
        if (isDead()) return DEAD();
        const out = (v as (...a: unknown[]) => unknown).apply(t, args);
        if (out instanceof Promise) {
          const tracked = out.then(
            () => undefined,
            () => undefined,
          );
          inFlight.add(tracked);
          void tracked.then(() => inFlight.delete(tracked));
        }
        return out;
      };
    },
  });
}

export async function openCrashableWorld(
  kind: "memory" | "postgres",
  opts: Opts = {},
  slots = 2,
): Promise<CrashableWorld> {
  let serial = 0;
  const closers: (() => Promise<void>)[] = [];
  let make: (owner: string, isDead: () => boolean, inFlight: Set<Promise<unknown>>) => Runtime;
  let name: string;
  if (kind === "memory") {
    const checkpointer = new MemorySaver();
    const store = new MemoryRunStore();
    const limits = new MemoryLimits();
    name = "memory";
    make = (owner, isDead, inFlight) =>
      new Runtime({
        ...opts,
        owner,
        checkpointer: deadable<BaseCheckpointSaver>(checkpointer, isDead, inFlight),
        store: deadable<RunStore>(store, isDead, inFlight),
        limits,
      });
  } else {
    const schema = freshSchema("m");
    // migrations and the checkpointer the product uses; its own runtime stays idle
    const o = await openRuntime({ databaseUrl: serverUrl, dataDir: ":memory:", schema, poolSize: 6, qtable: false });
    const { db, saver } = o;
    name = db.kind === "server" ? "postgres-server" : "postgres-embedded";
    closers.push(async () => {
      if (db.kind === "server") await db.pool.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
      await o.close();
    });
    make = (owner, isDead, inFlight) => {
      const limits = new PgLimits(db, { owner });
      closers.unshift(() => limits.close());
      return new Runtime({
        ...opts,
        owner,
        checkpointer: deadable<BaseCheckpointSaver>(saver, isDead, inFlight),
        store: deadable<RunStore>(new PgRunStore(db), isDead, inFlight),
        limits,
      });
    };
  }
  const procs: CrashableProcess[] = [];
  const spawn = (i: number) => {
    const p: CrashableProcess = {
      owner: `proc-${i}-${serial++}`,
      dead: false,
      inFlight: new Set(),
      runtime: undefined as unknown as Runtime,
    };
    p.runtime = make(p.owner, () => p.dead, p.inFlight);
    procs[i] = p;
  };
  for (let i = 0; i < slots; i++) spawn(i);
  return {
    name,
    procs,
    crash: (i) => void (procs[i]!.dead = true),
    async settled(i) {
      const p = procs[i]!;
      while (p.inFlight.size > 0) await Promise.all([...p.inFlight]);
    },
    restart: (i) => spawn(i),
    async close() {
      await Promise.allSettled(procs.map((p) => p.runtime.drain()));
      for (const c of closers) await c();
    },
  };
}
